# bench/plot_gpu.gp - per_cuda on the GPU, µs per operation vs N (each
# operation captured once as a CUDA graph and replayed):
#   (1) stratified sample, (2) batch update, (3) buffer step: per_cuda
#       against its baseline in the same run (a CUB scan over all N + B
#       binary searches, a scatter of the B values, both for the step),
#       B = 256, 1024 and 4096;
#   (4) buffer step on the GPU against per.h's per_buffer doing the same
#       step on the CPU (one thread), the same B;
#   (5) baseline µs / per_cuda µs at B = 1024 for sample, buffer sample,
#       tree step, buffer step and update (above 1: per_cuda is faster);
#   (6) from Python: per.cuda's ReplayBuffer against a graph-captured torch
#       cumsum + searchsorted, µs per training step (add 8 + sample B +
#       update B), every N and B in the file.
#
#   gnuplot -e "dir='bench/results'" bench/plot_gpu.gp
#   gnuplot -e "dir='bench/results'; real='float'" bench/plot_gpu.gp
#
# Reads DIR/gpu_REAL.csv (bench/cuda/bench_cuda.cu --csv, through
# tools/gpu-check.sh), DIR/gpu_machine.txt and, when present,
# DIR/peers_cuda.csv (bench/peers_cuda.py); writes DIR/gpu.png (REAL =
# double) or DIR/gpu_REAL.png. Needs gnuplot 5 and awk.

if (!exists("dir")) dir = "bench/results"
if (!exists("real")) real = "double"
if (!exists("out")) out = dir . (real eq "double" ? "/gpu.png" : sprintf("/gpu_%s.png", real))
# The batch sizes of panels 1 to 4, one line each.
if (!exists("bs")) bs = "256 1024 4096"

# Rows of one op and B, sorted by N: column 2 N, 3 B, 4 op, 5 per_cuda
# graph µs, 8 baseline µs, 9 baseline / per_cuda.
sel(op, b, col) = sprintf("< awk -F, '$4 == \"%s\" && $3 == %d && $%d != \"\" { print $2, $%d }' %s/gpu_%s.csv | sort -g", \
                          op, b, col, col, dir, real)
# peers_cuda.csv: column 1 N, 2 B, 4 contender, 7 median µs per step.
peer(who, b) = sprintf("< awk -F, '$4 == \"%s\" && $2 == %d { print $1, $7 }' %s/peers_cuda.csv | sort -g", \
                       who, b, dir)
have_peers = system(sprintf("test -s %s/peers_cuda.csv && echo 1 || echo 0", dir)) + 0
gpu = system(sprintf("awk -F': ' '/^gpu:/ { split($2, a, \",\"); print a[1] }' %s/gpu_machine.txt 2>/dev/null", dir))
if (gpu eq "") gpu = "GPU"

# One colour per B; per_cuda solid with filled points, the baseline dashed
# with open ones.
bcol(b) = b == 256 ? "#27ae60" : b == 1024 ? "#1f5fa8" : b == 4096 ? "#8e44ad" : "#7f8c8d"

set terminal pngcairo size 1800,1150 font "sans,11" noenhanced
set output out
set datafile separator whitespace
set multiplot layout 2,3 title sprintf("per_cuda on %s, PER_REAL=%s: each operation one CUDA graph, mean µs of its replays (lower is better, except × baseline)", gpu, real)
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key top left box opaque samplen 3 spacing 1.1
set format y "%g"
set logscale xy 2
set xlabel "N (leaves)"
set xtics ("2^12" 4096, "2^14" 16384, "2^16" 65536, "2^18" 262144, \
           "2^20" 1048576, "2^22" 4194304, "2^24" 16777216)
set xrange [3000:2.4e7]

set ylabel "µs per operation"
# Room above the lines for the key.
set key top left box opaque maxrows 3
set offsets 0, 0, graph 0.3, graph 0.05
do for [p = 1:3] {
  op = word("sample update buffer", p)
  set title word("'stratified sample of B\nbaseline: CUB scan over all N + B binary searches' " . \
                 "'batch update of B (per_cuda keeps the tree)\nbaseline: a scatter of B values into a flat array' " . \
                 "'buffer step: add B, sample B (items gathered), update B\nbaseline: scan + searches + scatter'", p)
  plot for [b in bs] sel(op, int(b), 5) using 1:2 with linespoints lw 2 pt 7 lc rgb bcol(int(b)) title sprintf("per_cuda B = %s", b), \
       for [b in bs] sel(op, int(b), 8) using 1:2 with linespoints lw 2 dt 2 pt 6 lc rgb bcol(int(b)) title sprintf("baseline B = %s", b)
}

set title "buffer step, GPU vs CPU\nper_cuda_buffer vs per.h's per_buffer (one thread), same step"
plot for [b in bs] sel("buffer_cpu", int(b), 5) using 1:2 with linespoints lw 2 pt 7 lc rgb bcol(int(b)) title sprintf("GPU B = %s", b), \
     for [b in bs] sel("buffer_cpu", int(b), 8) using 1:2 with linespoints lw 2 dt 2 pt 6 lc rgb bcol(int(b)) title sprintf("CPU B = %s", b)

set title "× baseline at B = 1024 (higher is better)\nbaseline µs / per_cuda µs, baselines as above"
set ylabel "baseline / per_cuda"
set key top left box opaque maxrows 3
set ytics ("1/16" 0.0625, "1/8" 0.125, "1/4" 0.25, "1/2" 0.5, "1" 1, "2" 2, "4" 4, "8" 8, "16" 16, "32" 32)
plot sel("sample", 1024, 9) using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f5fa8" title "sample", \
     sel("buf_sample", 1024, 9) using 1:2 with linespoints lw 2 pt 5 lc rgb "#16a085" title "buffer sample", \
     sel("step", 1024, 9) using 1:2 with linespoints lw 2 pt 9 lc rgb "#e67e22" title "tree step", \
     sel("buffer", 1024, 9) using 1:2 with linespoints lw 2 pt 11 lc rgb "#8e44ad" title "buffer step", \
     sel("update", 1024, 9) using 1:2 with linespoints lw 2 pt 13 lc rgb "#c0392b" title "update", \
     1 with lines lw 1 dt 3 lc rgb "black" title "equal"

set title "from Python: per.cuda vs torch cumsum + searchsorted, both graphs\nµs per step: add 8 + sample B + update B"
set ylabel "µs per step"
set key top left box opaque maxrows 2
unset logscale y
set autoscale yfix
set offsets 0, 0, graph 0.5, graph 0.1
set ytics autofreq
if (have_peers) {
  pbs = system(sprintf("awk -F, 'NR > 1 { print $2 }' %s/peers_cuda.csv | sort -gu | tr '\\n' ' '", dir))
  pns = system(sprintf("awk -F, 'NR > 1 { print $1 }' %s/peers_cuda.csv | sort -gu | tr '\\n' ' '", dir))
  set xrange [word(pns, 1) / 1.6 : word(pns, words(pns)) * 1.6]
  plot for [b in pbs] peer("per.cuda", int(b)) using 1:2 with linespoints lw 2 pt 7 lc rgb bcol(int(b)) title sprintf("per.cuda B = %s", b), \
       for [b in pbs] peer("torch graph", int(b)) using 1:2 with linespoints lw 2 dt 2 pt 6 lc rgb bcol(int(b)) title sprintf("torch graph B = %s", b)
} else {
  unset key
  set label 1 "no peers_cuda.csv (bench/peers_cuda.py)" at graph 0.5, 0.5 center
  set xrange [1e6:4e6]
  set yrange [0:1]
  plot 2 notitle
}

unset multiplot
