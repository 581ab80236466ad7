# bench/plot_store.gp - the trajectory store (bench/store.sh): samples per
# second at three cache hit rates beside the same draws from RAM (left,
# log scale), and checkpoint seconds of the store (its pages dropped from
# the page cache first, and cached) and of per_buffer_save at two sizes
# (right, log scale).
#
#   gnuplot -e "dir='bench/results'" bench/plot_store.gp
#
# Reads DIR/store.csv (bench_store --csv); writes DIR/store.png. Needs
# gnuplot 5 and awk. CSV rows: "sample,ITEM,item_bytes,bytes,CACHE,hit
# share,store samples/s,RAM samples/s,ratio,RSS KiB" and "ckpt,28KB,
# 28224,bytes,store,seconds,save,seconds,RSS KiB,cached,seconds".

if (!exists("dir")) dir = "bench/results"
if (!exists("out")) out = dir . "/store.png"

samples = sprintf("< awk -F, '$1 == \"sample\" { \
  if ($2 != last) { x += 0.7; last = $2 } \
  printf \"%%g \\\"%%s %%s\\\\n%%.0f%%%% hits\\\" %%s %%s\\n\", x, $2, $5, 100 * $6, $7, $8; x += 1 }' %s/store.csv", dir)
ckpts = sprintf("< awk -F, '$1 == \"ckpt\" { \
  printf \"%%g \\\"%%.0f MiB\\\" %%s %%s %%s\\n\", n++, $4 / 1048576, $6, $8, $11 }' %s/store.csv", dir)

set terminal pngcairo size 1400,650 font "sans,11" noenhanced
set output out
set multiplot layout 1,2
set style fill solid 0.85 border rgb "#333333"
set grid ytics mytics lc rgb "#dddddd"
set logscale y 10
set key top right

set title "Batches of 256, alpha 0: samples per second (higher is better)"
set ylabel "samples per second"
set xtics nomirror font "sans,9"
set bmargin 4
set boxwidth 0.4
plot samples using ($1 - 0.2):3:xtic(2) with boxes lc rgb "#1f77b4" title "per_store (disk + cache)", \
     '' using ($1 + 0.2):4 with boxes lc rgb "#aaaaaa" title "per_buffer (all in RAM)"

set key top left
set title "Checkpoint of 28 KB frame stacks: seconds (lower is better)"
set ylabel "seconds"
set boxwidth 0.25
plot ckpts using ($1 - 0.27):3:xtic(2) with boxes lc rgb "#1f77b4" title "per_store_checkpoint (pages dropped first)", \
     '' using ($1):5 with boxes lc rgb "#9ecae1" title "per_store_checkpoint (pages cached)", \
     '' using ($1 + 0.27):4 with boxes lc rgb "#d62728" title "per_buffer_save (the whole buffer)"
unset multiplot
