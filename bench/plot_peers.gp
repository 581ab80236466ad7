# bench/plot_peers.gp - per.h against its peers (TorchRL's and cpprb's C++
# sum trees, the textbook float32 tree), ns per item vs N, for stratified
# sampling and batch update at B = 256, 1024 and 4096: the CUDA
# coursework's CPU grid (N in {2^12, 2^14, 2^16, 100000}) and the sizes
# around it, PER_REAL=double.
#
#   gnuplot -e "dir='bench/results'" bench/plot_peers.gp
#   gnuplot -e "dir='/tmp/q'; bs='16 64'" bench/plot_peers.gp
#
# Reads DIR/peers_double.csv (bench/peers.sh: one process, interleaved,
# same inputs); writes DIR/peers.png. Needs gnuplot 5 and awk.

if (!exists("dir")) dir = "bench/results"
if (!exists("real")) real = "double"
if (!exists("out")) out = dir . "/peers.png"
# The batch sizes, one panel column each (run.sh --quick: "16 64").
if (!exists("bs")) bs = "256 1024 4096"

# Rows of one op, B and side, sorted by N: column 2 op, 3 N, 4 B, 5 side,
# 6 ns per item.
sel(op, b, side) = sprintf("< awk -F, '$2 == \"%s\" && $4 == %d && $5 == \"%s\" { print $3, $6 }' %s/peers_%s.csv | sort -g", \
                           op, b, side, dir, real)

set terminal pngcairo size 1500,1000 font "sans,11" noenhanced
set output out
set datafile separator whitespace
set multiplot layout 2,3 title sprintf("per.h vs TorchRL, cpprb and the textbook tree (PER_REAL=%s, median ns per item; lower is better)", real)
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key tmargin center horizontal nobox maxrows 1 width -2
set format y "%g"
set logscale xy 2
set xlabel "N (leaves)"
set ylabel "ns per item"
set xtics ("2^10" 1024, "2^12" 4096, "2^14" 16384, "2^16" 65536, \
           "2^20" 1048576, "2^24" 16777216)
set xrange [800:2.2e7]

do for [op in "sample update"] {
  do for [b in bs] {
    set title sprintf("%s, B = %s", op eq "sample" ? "stratified sample" : "batch update", b)
    plot sel(op, int(b), "cpprb") using 1:2 with linespoints lw 2 pt 9 lc rgb "#8e44ad" title "cpprb", \
         sel(op, int(b), "torchrl") using 1:2 with linespoints lw 2 pt 11 lc rgb "#e67e22" title "TorchRL", \
         sel(op, int(b), "textbook") using 1:2 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "textbook float32", \
         sel(op, int(b), "per.h") using 1:2 with linespoints lw 3 pt 5 lc rgb "#1f5fa8" title "per.h"
  }
}

unset multiplot
