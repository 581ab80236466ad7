# bench/plot_store_peers.gp - per.TrajectoryStore against TorchRL's
# LazyMemmapStorage + PrioritizedSampler and flashbax's Vault
# (bench/store_peers.py), per item size (64-byte transitions, 28 KB frame
# stacks), log scale: add MB/s until written and fsynced, beside the disk
# alone (left); samples per second, batches of 256 with the priority
# update, median and min-max (middle); seconds to reopen a replay that
# samples, cold (right). Labels: how many times faster per is.
#
#   gnuplot -e "dir='bench/results'" bench/plot_store_peers.gp
#   gnuplot -e "csv='/tmp/x.csv'; out='/tmp/x.png'" bench/plot_store_peers.gp
#
# Reads DIR/store_peers.csv (or csv); writes DIR/store_peers.png (or
# out). Needs gnuplot 5 and awk. CSV columns: what, item, item_bytes,
# side, version, data_bytes, value, lo, hi, unit, per_ratio, disk_mib,
# rss_mib, rss_file_mib, hwm_mib, base_mib, note. A side missing from the
# CSV (left out of the run) has no bar.

if (!exists("dir")) dir = "bench/results"
if (!exists("csv")) csv = dir . "/store_peers.csv"
if (!exists("out")) out = dir . "/store_peers.png"

# Rows of one figure and side: x (the item's group plus the side's
# offset), value, lo, hi, per_ratio.
sel(what, side, off) = sprintf("< awk -F, 'NR > 1 && $1 == \"%s\" && $4 == \"%s\" { \
  print ($2 == \"64B\" ? 0 : 1) + %g, $7, ($8 == \"\" ? $7 : $8), ($9 == \"\" ? $7 : $9), $11 }' %s", \
  what, side, off, csv)
# label above a peer's bar: how many times faster per is
faster(r) = r >= 10 ? sprintf("per %.0fx", r) : sprintf("per %.2gx", r)

set terminal pngcairo size 1800,700 font "sans,11" noenhanced
set output out
set multiplot layout 1,3 title "per.TrajectoryStore vs TorchRL (LazyMemmapStorage) and flashbax (Vault): the same samples, the same run"
set style fill solid 0.85 border rgb "#333333"
set grid ytics mytics lc rgb "#dddddd"
set logscale y 10
set format y "%g"
set key below center horizontal maxcols 3 font "sans,9"
set offsets 0, 0, graph 0.08, 0
set autoscale yfixmax
set xtics nomirror ("64 B transitions" 0, "28 KB frame stacks" 1)
set xrange [-0.55:1.55]

set title "Add until written and fsynced: MB/s (higher is better)"
set ylabel "MB/s of samples"
set boxwidth 0.13
plot sel("add", "per", -0.3) using 1:2 with boxes lc rgb "#1f77b4" title "per.TrajectoryStore", \
     sel("add", "torchrl", -0.15) using 1:2 with boxes lc rgb "#e67e22" title "TorchRL memmap", \
     sel("add", "flashbax", 0) using 1:2 with boxes lc rgb "#2ca02c" title "flashbax Vault (writes of MiBs)", \
     sel("add", "flashbax-each", 0.15) using 1:2 with boxes lc rgb "#98df8a" title "flashbax Vault (a write a rollout)", \
     sel("add", "disk", 0.3) using 1:2 with boxes lc rgb "#aaaaaa" title "the disk alone", \
     sel("add", "torchrl", -0.15) using 1:($2 * 1.3):(faster($5)) with labels font "sans,8" notitle, \
     sel("add", "flashbax", 0) using 1:($2 * 1.3):(faster($5)) with labels font "sans,8" notitle, \
     sel("add", "flashbax-each", 0.15) using 1:($2 * 1.3):(faster($5)) with labels font "sans,8" notitle, \
     sel("add", "disk", 0.3) using 1:($2 * 1.3):(sprintf("per = %.2g x this", $5)) with labels font "sans,8" notitle

set title "Batches of 256 + priority update, alpha 0.6: samples/s (higher is better)"
set ylabel "samples per second"
set boxwidth 0.18
plot sel("sample", "per", -0.2) using 1:2 with boxes lc rgb "#1f77b4" title "per (its files: cache + pread)", \
     sel("sample", "torchrl", 0) using 1:2 with boxes lc rgb "#e67e22" title "TorchRL (its memmap)", \
     sel("sample", "flashbax", 0.2) using 1:2 with boxes lc rgb "#2ca02c" title "flashbax (vault.read into RAM)", \
     sel("sample", "per", -0.2) using 1:2:3:4 with yerrorbars lc rgb "#333333" pt -1 notitle, \
     sel("sample", "torchrl", 0) using 1:2:3:4 with yerrorbars lc rgb "#333333" pt -1 notitle, \
     sel("sample", "flashbax", 0.2) using 1:2:3:4 with yerrorbars lc rgb "#333333" pt -1 notitle, \
     sel("sample", "torchrl", 0) using 1:($4 * 1.3):(faster($5)) with labels font "sans,8" notitle, \
     sel("sample", "flashbax", 0.2) using 1:($4 * 1.3):(faster($5)) with labels font "sans,8" notitle

set title "Reopen, files out of the page cache: seconds (lower is better)"
set ylabel "seconds"
set boxwidth 0.22
plot sel("open", "per", -0.13) using 1:2 with boxes lc rgb "#1f77b4" title "per: resume (CRC-checks all data)", \
     sel("open", "flashbax", 0.13) using 1:2 with boxes lc rgb "#2ca02c" title "flashbax: read all + prioritised buffer", \
     sel("open", "flashbax", 0.13) using 1:($2 * 1.3):(faster($5)) with labels font "sans,8" notitle
unset multiplot
