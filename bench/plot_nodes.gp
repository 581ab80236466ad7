# bench/plot_nodes.gp - per.ReplayBuffer with float nodes against double
# nodes: bytes per item (left) and microseconds per training step (add 4,
# sample 256, update 256; right), one line per node type, against the
# capacity (log scale).
#
#   gnuplot -e "dir='bench/results'" bench/plot_nodes.gp
#
# Reads DIR/nodes.csv (bench/nodes.sh); writes DIR/nodes.png. Needs
# gnuplot 5 and awk.

if (!exists("dir")) dir = "bench/results"
if (!exists("out")) out = dir . "/nodes.png"

# CSV columns: 1 capacity, 2 nodes, 3 bytes_per_item, 4 step_us,
# 5 step_us_min, 6 step_us_max
rows(n) = sprintf("< awk -F, 'NR > 1 && $2 == \"%s\" { print $1, $3, $4, $5, $6 }' %s/nodes.csv", n, dir)

set terminal pngcairo size 1300,560 font "sans,11" noenhanced
set output out
set datafile separator whitespace
set multiplot layout 1,2 title "per.ReplayBuffer: float nodes (nodes=numpy.float32) against double, 44-byte items"
set logscale x 2
set format x "2^%L"
set offsets graph 0.05, graph 0.05, 0, 0
set xlabel "capacity (items)"
set key top left
set grid
set ylabel "bytes per item (process RSS, items included)"
set yrange [0:*]
plot rows("double") using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "double", \
     rows("float") using 1:2 with linespoints lw 2 pt 5 lc rgb "#ff7f0e" title "float"
set ylabel "microseconds per step (median; bars: min, max)"
plot rows("double") using 1:3:4:5 with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "double", \
     rows("float") using 1:3:4:5 with yerrorlines lw 2 pt 5 lc rgb "#ff7f0e" title "float"
unset multiplot
