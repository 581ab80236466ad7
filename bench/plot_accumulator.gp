# bench/plot_accumulator.gp - the trajectory accumulator on seed 003's
# rollout: environment steps per second of per.TrajectoryAccumulator, the
# NumPy loops it replaces (Python, one process) and per_traj.h against
# plain arrays of structs (C), one bar each, on a log scale.
#
#   gnuplot -e "dir='bench/results'" bench/plot_accumulator.gp
#
# Reads DIR/accumulator.csv (bench/accumulator.sh); writes
# DIR/accumulator.png. Needs gnuplot 5 and awk.

if (!exists("dir")) dir = "bench/results"
if (!exists("out")) out = dir . "/accumulator.png"

# One line a bar: x, "label", steps/s, colour, "ratio". Bars of one group
# (Python exact, Python loose, C record, C field) side by side, a gap
# between groups. Python bars carry x numpy_add (same variant), C bars
# x per (Python, exact). CSV columns: 1 name, 2 variant, 3 steps/s,
# 7 ratio_vs_numpy, 8 ratio_vs_python (the last column, what, may hold
# commas, and is not read).
bars = sprintf("< awk -F, 'NR > 1 { \
  c = ($1 ~ /^c_/); g = ($1 ~ /^c_/ ? \"C \" : \"Python \") $2; \
  if (g != last) { x += 0.6; last = g } \
  col = ($1 == \"per\" ? 2056104 : $1 == \"numpy_add\" ? 12597547 : \
         $1 == \"numpy_inline\" ? 15105570 : $1 == \"c_per_traj\" ? 1193046 : 8359053); \
  r = c ? sprintf(\"%%.0fx per\", $8) : sprintf(\"%%.2fx\", $7); \
  printf \"%%g \\\"%%s\\\\n%%s\\\" %%s %%d \\\"%%s\\\"\\n\", x, $1, g, $3, col, r; x += 1 }' %s/accumulator.csv", dir)

set terminal pngcairo size 1300,700 font "sans,11" noenhanced
set output out
set datafile separator whitespace
set title "The three-timescale rollout (T = 64): environment steps per second, median (higher is better)\nlabels: Python bars x numpy_add in the same variant; C bars x per (Python, exact)"
set logscale y 10
set format y "%.0e"
set yrange [1e4:3e9]
set ylabel "steps per second"
set grid ytics mytics lc rgb "#dddddd"
set style fill solid 0.85 border rgb "#333333"
set boxwidth 0.8
set xtics nomirror font "sans,9"
set bmargin 5
unset key
plot bars using 1:3:4:xticlabels(2) with boxes lc rgb variable, \
     bars using 1:($3 * 1.6):5 with labels font "sans,10"
