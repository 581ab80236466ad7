# bench/plot_server.gp - the replay server on localhost (bench/server.py):
# per-server, per.net.Server and Reverb against the number of actor
# processes inserting while one learner samples batches of 256 and
# updates their priorities; a row an item size (64-byte rows, 28 KB
# frame stacks). Left: items inserted per second; middle: items sampled
# per second; right: the learner's p99 wait for a batch. Medians of the
# rounds, bars from their min to max, log scale. Dashed: the same
# requests handed to per_net.h in process (the ceiling: inserts alone,
# samples alone) and the bare ZeroMQ round trip of as many bytes (the
# floor's samples/s and p99, without actors). Labels: per-server over
# Reverb (p99: Reverb's over per-server's).
#
#   gnuplot -e "dir='bench/results'" bench/plot_server.gp
#
# Reads DIR/server.csv (or csv); writes DIR/server.png (or out). Needs
# gnuplot 5 and awk. CSV columns: 1 system, 2 item, 4 actors, 6-8
# inserts/s (median, min, max), 9-11 samples/s, 15-17 p99 us, 21-23 per
# over Reverb (inserts, samples, p99).

if (!exists("dir")) dir = "bench/results"
if (!exists("csv")) csv = dir . "/server.csv"
if (!exists("out")) out = dir . "/server.png"

# rows of one system and item size: actors, median, min, max, ratio
sel(sys, item, c, r) = sprintf("< awk -F, 'NR > 1 && $1 == \"%s\" && $2 == \"%s\" && $%d > 0 { \
  print $4, $%d, $%d, $%d, ($%d == \"\" ? 0 : $%d) }' %s", sys, item, c, c, c + 1, c + 2, r, r, csv)
# a level measured without actors, drawn across the actor counts
level(sys, item, c) = sprintf("< awk -F, 'NR > 1 && $1 == \"%s\" && $2 == \"%s\" { \
  print 0, $%d; print 8, $%d }' %s", sys, item, c, c, csv)
times(r) = r >= 10 ? sprintf("%.0fx", r) : sprintf("%.1fx", r)

set terminal pngcairo size 1800,1000 font "sans,11" noenhanced
set output out
set multiplot layout 2,3 title "Replay over ZeroMQ on localhost: K actor processes insert chunks of 32 items, one learner samples 256 and updates (medians of the rounds; same machine, same run)"
set grid ytics mytics xtics lc rgb "#dddddd"
set logscale y 10
set format y "%g"
set xrange [-0.5:8.5]
set xtics ("0" 0, "1" 1, "4" 4, "8" 8)
set xlabel "actor processes"
set key top right font "sans,9" opaque box
set offsets 0, 0, graph 0.1, graph 0.05

do for [item in "64B 28KB"] {
  what = item eq "64B" ? "64-byte items" : "28 KB items"
  set title what . ": items inserted per second (higher is better)"
  set ylabel "items per second"
  plot sel("per-server", item, 6, 21) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#1f77b4" title "per-server (C)", \
       sel("per.net", item, 6, 21) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#17becf" title "per.net.Server (Python)", \
       sel("reverb", item, 6, 21) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#e67e22" title "Reverb 0.14", \
       level("in-process", item, 6) using 1:2 with lines dt 2 lw 2 lc rgb "#555555" title "in process (ceiling)", \
       sel("per-server", item, 6, 21) using 1:($2 * 1.35):(times($5)) with labels font "sans,9" notitle

  set title what . ": items sampled per second, B = 256 (higher is better)"
  set ylabel "items per second"
  plot sel("per-server", item, 9, 22) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#1f77b4" title "per-server (C)", \
       sel("per.net", item, 9, 22) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#17becf" title "per.net.Server (Python)", \
       sel("reverb", item, 9, 22) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#e67e22" title "Reverb 0.14", \
       level("in-process", item, 9) using 1:2 with lines dt 2 lw 2 lc rgb "#555555" title "in process (ceiling)", \
       level("zmq-floor", item, 9) using 1:2 with lines dt 3 lw 2 lc rgb "#2ca02c" title "ZeroMQ alone, as many bytes", \
       sel("per-server", item, 9, 22) using 1:($2 * 1.35):(times($5)) with labels font "sans,9" notitle

  set title what . ": p99 of the learner's wait for a batch (lower is better)"
  set ylabel "microseconds"
  plot sel("per-server", item, 15, 23) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#1f77b4" title "per-server (C)", \
       sel("per.net", item, 15, 23) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#17becf" title "per.net.Server (Python)", \
       sel("reverb", item, 15, 23) using 1:2:3:4 with yerrorlines lw 2 lc rgb "#e67e22" title "Reverb 0.14", \
       level("zmq-floor", item, 15) using 1:2 with lines dt 3 lw 2 lc rgb "#2ca02c" title "ZeroMQ alone, as many bytes", \
       sel("per-server", item, 15, 23) using 1:($2 / 1.35):(times($5)) with labels font "sans,9" notitle
}
unset multiplot
