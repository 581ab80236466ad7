# bench/plot.gp - ns per item vs N for stratified sampling and batch update
# (B = 1024): per.h (double and float) against the classic float32 tree.
#
#   gnuplot -e "dir='bench/results'" bench/plot.gp
#
# Reads DIR/tree_{double,float}.csv (the grid) and, when present,
# DIR/sweep_{double,float}.csv (more sizes), as written by bench_tree --csv;
# writes DIR/tree.png. The classic tree is measured in both programs; the
# plot shows its figures from the double program (the float program's are
# the same tree, measured again). Needs gnuplot 5 (Debian: gnuplot-nox) and
# awk.

if (!exists("dir")) dir = "bench/results"
if (!exists("out")) out = dir . "/tree.png"

# Rows of one op at B = 1024 from the CSVs of one PER_REAL, sorted by N:
# column 3 is N, `col` the figure (5 per.h ns/item, 6 classic ns/item).
sel(real, op, col) = sprintf("< awk -F, '$2 == \"%s\" && $4 == 1024 { print $3, $%d }' %s/tree_%s.csv $(ls %s/sweep_%s.csv 2>/dev/null) | sort -g", \
                             op, col, dir, real, dir, real)

set terminal pngcairo size 1400,560 font "sans,11" noenhanced
set output out
set datafile separator whitespace
set multiplot layout 1,2 title "per.h sum tree vs classic float32 tree (B = 1024, median ns per item; lower is better)"

set logscale xy 2
set xlabel "N (leaves)"
set ylabel "ns per item"
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key top left box opaque
set xtics ("2^10" 1024, "2^12" 4096, "2^14" 16384, "2^16" 65536, "2^18" 262144, \
           "10^6" 1000000, "2^22" 4194304, "2^24" 16777216, "2^26" 67108864)
set format y "%g"
set xrange [700:1e8]

# The project's targets for stratified sampling (single thread, double).
$targets << EOD
65536 15
1000000 50
16777216 100
EOD

set title "stratified sample of 1024"
plot sel("double", "sample", 6) using 1:2 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "classic float32", \
     sel("double", "sample", 5) using 1:2 with linespoints lw 2 pt 5 lc rgb "#1f5fa8" title "per.h double", \
     sel("float", "sample", 5) using 1:2 with linespoints lw 2 pt 9 dt 2 lc rgb "#27ae60" title "per.h float", \
     $targets using 1:2 with points pt 3 ps 2 lc rgb "black" title "target (double)"

set title "batch update of 1024 (per.h: per_tree_set_batch; classic: 1024 updates)"
plot sel("double", "update", 6) using 1:2 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "classic float32", \
     sel("double", "update", 5) using 1:2 with linespoints lw 2 pt 5 lc rgb "#1f5fa8" title "per.h double", \
     sel("float", "update", 5) using 1:2 with linespoints lw 2 pt 9 dt 2 lc rgb "#27ae60" title "per.h float"

unset multiplot
