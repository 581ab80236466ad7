# bench/plot_samplers.gp - sampling without replacement, the four panels of
# the sampling blog's runtime figure, measured on per.h:
#   (1) categorical, k = 1024, time vs N: per_cat_sample against
#       zero-and-restore on the classic float32 tree;
#   (2) categorical, N = 64000, time vs k: the same two;
#   (3) uniform, n = 64000, time vs k: per_swap_sample (partial
#       Fisher-Yates) against a hash-set rejection sampler;
#   (4) categorical / uniform, time ratio vs k at N = 64000: per_cat over
#       per_swap, and zero-and-restore over per_swap.
#
#   gnuplot -e "dir='bench/results'" bench/plot_samplers.gp
#
# Reads DIR/curve_cat_n.csv (panel 1) and DIR/curve_k.csv (panels 2-4), as
# written by bench_samplers --csv (bench/run.sh makes both); writes
# DIR/samplers.png. Needs gnuplot 5 (Debian: gnuplot-nox) and awk.

if (!exists("dir")) dir = "bench/results"
if (!exists("out")) out = dir . "/samplers.png"

# Column 2 is the op, 3 N, 4 k, 8 per.h ns per batch, 9 baseline ns per
# batch; `x` picks the x column, `col` the figure (printed in µs).
sel(file, op, x, col) = sprintf("< awk -F, '$2 == \"%s\" { print $%d, $%d / 1000 }' %s/%s | sort -g", \
                                op, x, col, dir, file)
# Panel 4: per k, cat's per.h and baseline batch times over swap's per.h.
ratios = sprintf("< awk -F, '$2 == \"cat\" { c[$4] = $8; z[$4] = $9 } $2 == \"swap\" { s[$4] = $8 } END { for (k in c) if (k in s) print k, c[k] / s[k], z[k] / s[k] }' %s/curve_k.csv | sort -g", dir)

set terminal pngcairo size 1400,1000 font "sans,11" noenhanced
set output out
set datafile separator whitespace
set multiplot layout 2,2 title "sampling without replacement (median per batch; lower is better)"
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key top left box opaque
set format y "%g"
set logscale xy 10

set title "(1) categorical, k = 1024: time vs N"
set xlabel "N (leaves)"
set ylabel "µs per batch"
plot sel("curve_cat_n.csv", "cat", 3, 9) using 1:2 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "zero-and-restore, classic float32 tree", \
     sel("curve_cat_n.csv", "cat", 3, 8) using 1:2 with linespoints lw 2 pt 5 lc rgb "#1f5fa8" title "per.h per_cat_sample"

set title "(2) categorical, N = 64000: time vs k"
set xlabel "k (batch)"
plot sel("curve_k.csv", "cat", 4, 9) using 1:2 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "zero-and-restore, classic float32 tree", \
     sel("curve_k.csv", "cat", 4, 8) using 1:2 with linespoints lw 2 pt 5 lc rgb "#1f5fa8" title "per.h per_cat_sample"

set title "(3) uniform, n = 64000: time vs k"
plot sel("curve_k.csv", "swap", 4, 9) using 1:2 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "hash-set rejection", \
     sel("curve_k.csv", "swap", 4, 8) using 1:2 with linespoints lw 2 pt 5 lc rgb "#1f5fa8" title "per.h per_swap_sample (Fisher-Yates)"

set title "(4) categorical / uniform at N = 64000 (the blog: 25-30x)"
set logscale y 2
set ylabel "time ratio to per_swap_sample"
set key bottom right
plot ratios using 1:3 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "zero-and-restore / per_swap", \
     ratios using 1:2 with linespoints lw 2 pt 5 lc rgb "#1f5fa8" title "per_cat / per_swap"

unset multiplot
