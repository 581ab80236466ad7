# The greedy evaluations of python/examples/apex_server.py (its --csv:
# actor_steps, updates, greedy_mean, episodes), drawn against the actors'
# environment steps. From the repository root:
#   gnuplot python/examples/results/apex_server.gp
# reads python/examples/results/apex_server.csv, writes apex_server.png
# beside it.
dir = "python/examples/results/"
set terminal pngcairo size 1000,560 font "sans,11" noenhanced
set output dir."apex_server.png"
set datafile separator ","
set title "Ape-X DQN on CartPole-v1 over per.net (apex_server.py, 3 actors, seed 1): greedy evaluations every 2,000 updates\n(the mean of up to 100 greedy episodes; an evaluation stops once a mean of 475 is out of reach)"
set xlabel "environment steps of all actors"
set ylabel "greedy mean return"
set yrange [0:520]
set grid lc rgb "#dddddd"
set key left center box opaque
plot dir."apex_server.csv" every ::1 using 1:3 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#08519c" title "greedy mean return", \
     475 with lines dt 2 lc rgb "#d62728" title "475: solved when 100 greedy episodes average it"
