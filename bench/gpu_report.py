#!/usr/bin/env python3
"""bench/gpu_report.py [RESULTS_DIR]: the GPU benchmark's CSVs
(gpu_double.csv, gpu_float.csv, written by bench_cuda --csv) as one
Markdown table on stdout: per row N, B and operation, the graph time of
per_cuda in microseconds for each node type, the launches, and the ratio
against the cumsum + binary-search baseline (above 1: per_cuda is
faster). gpu_machine.txt, when present, heads the table.
tools/gpu-check.sh writes that table to RESULTS_DIR/gpu.md.

summary_lines(RESULTS_DIR, nname) gives the shorter section of bench/README.md
(between <!-- gpu:begin --> and <!-- gpu:end -->): the double rows at
B = 1024 and 65536, and the targets; bench/report.py writes it."""
import csv
import os
import sys


def load(path):
    if not os.path.exists(path):
        return {}
    with open(path, newline='') as f:
        return {(int(r['N']), int(r['B']), r['op']): r
                for r in csv.DictReader(f)}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'results')
    d = load(os.path.join(out, 'gpu_double.csv'))
    f = load(os.path.join(out, 'gpu_float.csv'))
    machine = os.path.join(out, 'gpu_machine.txt')
    if os.path.exists(machine):
        for line in open(machine):
            print('    ' + line.rstrip())
        print()
    print('| N | B | op | double µs | launches | × baseline | '
          'float µs | × baseline |')
    print('|---:|---:|---|---:|---:|---:|---:|---:|')
    order = {'update': 0, 'update_td': 1, 'sample': 2, 'weights': 3,
             'step': 4, 'buffer': 5, 'buffer_cpu': 6, 'buf_sample': 7,
             'unique': 8, 'seq_step': 9}
    keys = sorted(set(d) | set(f), key=lambda k: (k[0], k[1], order.get(
        k[2], 9)))

    def ratio(r):
        return (r['ratio'] + 'x') if r and r['ratio'] else '–'

    for k in keys:
        rd, rf = d.get(k), f.get(k)
        print('| {} | {} | {} | {} | {} | {} | {} | {} |'.format(
            k[0], k[1], k[2],
            rd['graph_us'] if rd else '–',
            (rd or rf)['launches'], ratio(rd),
            rf['graph_us'] if rf else '–', ratio(rf)))
    print()
    print('Graph replay times (CUDA events, mean of 50 replays); the '
          'baseline is a CUB inclusive scan over all N priorities plus B '
          'binary searches (sample), a scatter (update), or both (step, '
          'buffer). buffer: per_cuda_buffer add_batch + sample (items '
          'gathered) + update on a full buffer of N 16-byte items; '
          'buffer_cpu: the same row against per.h\'s per_buffer doing the '
          'same step on the CPU (one thread) in the same run; buf_sample: '
          'per_cuda_buffer_sample alone (items gathered, weights) against '
          'the scan + search; unique: the same with PER_SAMPLE_UNIQUE '
          '(B <= 1024; one thread makes the picks) against buf_sample; '
          'seq_step: an R2D2 step (add 64 steps, sample B = 64 sequences '
          'of 64 steps every 32 with masks, update_seq their TD errors) '
          'against per.h\'s per_buffer doing it on the CPU.')
    lines = seed_table(d, str)
    if lines:
        print()
        print('\n'.join(lines))


def seed_table(d, nname):
    """Seed 001's grid (N in 2^12, 2^14, 2^16, 10^5, 2^20, 2^24; B in 256,
    1024, 4096), one run, double: per.h's buffer step on the CPU, the same
    step of per_cuda_buffer on the GPU, and the scan baseline on the GPU
    (a scatter, a CUB scan over all N and B binary searches): where the
    GPU starts to pay. Lines of Markdown, or none without buffer_cpu
    rows."""
    rows = sorted((n, b) for n, b, op in d
                  if op == 'buffer_cpu' and b in (256, 1024, 4096))
    if not rows:
        return []
    out = ["Seed 001's grid in one run (double, µs per step of add B + "
           "sample B with weights and items + update B; GPU: one CUDA graph "
           "replay): per.h on the CPU (one thread), per_cuda_buffer on the "
           "GPU, and the GPU's scan baseline.", "",
           "| N | B | per.h CPU | per_cuda GPU | GPU × CPU | scan baseline "
           "(GPU) |", "|---:|---:|---:|---:|---:|---:|"]
    for n, b in rows:
        c, g = d[(n, b, 'buffer_cpu')], d.get((n, b, 'buffer'))
        cpu, gpu = float(c['baseline_graph_us']), float(c['graph_us'])
        base = f"{float(g['baseline_graph_us']):.1f}" if g else '–'
        out.append(f"| {nname(n)} | {b} | {cpu:.1f} | {gpu:.1f} | "
                   f"{cpu / gpu:.2f}x | {base} |")
    return out


# The GPU targets (PER_REAL=double): (label, op, N, B, limit in µs).
GPU_TARGETS = [
    ("buffer step", "buffer", 1 << 24, 1024, 25.0),
    ("buffer step", "buffer", 1 << 20, 1024, 20.0),
    ("update", "update", 1 << 24, 1024, 10.0),
    ("sample", "sample", 1 << 24, 1024, 8.0),
]
# Ratio targets at B = 1024 (double): the tree step against the CUB scan
# baseline, at least `least` times as fast, for every N >= `from_n`.
GPU_RATIO_TARGETS = [
    ("tree step × CUB scan + search", "step", 1 << 18, 1.0),
    ("tree step × CUB scan + search", "step", 1 << 24, 4.0),
]
# The buffer step at B = 65536 within this factor of B = 1024, at 2^24.
GPU_BIG_BATCH = (1 << 24, 65536, 1024, 2.0)
SUMMARY_OPS = (("update", "× scatter"), ("sample", "× scan + search"),
               ("step", "×"), ("buffer", "×"))
SUMMARY_NAMES = {"update": "update", "sample": "sample",
                 "step": "tree step", "buffer": "buffer step"}


def summary_lines(out, nname):
    """The GPU section of bench/README.md as lines (an empty list when
    gpu_double.csv is not there), without the machine (bench/report.py
    heads it with gpu_machine.txt): per_cuda's µs per captured operation
    in double at B = 1024 for every N and at B = 65536, with the ratio to
    the baseline, the launches and the targets. nname(N) names a size as
    report.py's other tables do."""
    d = load(os.path.join(out, 'gpu_double.csv'))
    if not d:
        return []
    lines = ["µs per captured operation (a CUDA graph, mean of 50 replays "
              "after a warm-up), PER_REAL=double, and × the baseline in the "
              "same run: a CUB inclusive scan over all N priorities plus B "
              "binary searches for a sample, a scatter of the B values for "
              "an update, both for a step (above 1: per_cuda is faster). "
              "Every row, float too: `results/gpu.md`.", "",
              "| N | B | " + " | ".join(
                  f"{SUMMARY_NAMES[op]} | {x}" for op, x in SUMMARY_OPS)
              + " |",
              "|---:|---:|" + "---:|---:|" * len(SUMMARY_OPS)]
    keys = sorted({(n, b) for n, b, _ in d if b in (1024, 65536)},
                  key=lambda k: (k[1] != 1024, k[0], k[1]))
    for n, b in keys:
        cells = []
        for op, _ in SUMMARY_OPS:
            r = d.get((n, b, op))
            cells += [f"{float(r['graph_us']):.1f}" if r else "–",
                      f"{float(r['ratio']):.2f}x" if r and r['ratio']
                      else "–"]
        lines.append(f"| {nname(n)} | {b} | " + " | ".join(cells) + " |")
    launches = {}
    for (n, b, op), r in d.items():
        launches.setdefault(op, set()).add(int(r['launches']))

    def span(op):
        v = sorted(launches.get(op, ()))
        if not v:
            return "-"
        return str(v[0]) if v[0] == v[-1] else f"{v[0]} to {v[-1]}"

    lines += ["", "tree step: sample B + IS weights + update from TD errors; "
              "buffer step: `per_cuda_buffer` add_batch(B) + sample(B) with "
              "the 16-byte items gathered + update(B) on a full buffer. "
              f"Launches per operation: update {span('update')}, sample "
              f"{span('sample')}, weights {span('weights')}, tree step "
              f"{span('step')}, buffer step {span('buffer')}.", "",
              "| target (double) | N | B | limit | per_cuda | met? |",
              "|---|---|---|---:|---:|---|"]
    for label, op, n, b, lim in GPU_TARGETS:
        r = d.get((n, b, op))
        if not r:
            lines.append(f"| {label} | {nname(n)} | {b} | ≤ {lim:g} µs "
                         "| not measured | |")
            continue
        us = float(r['graph_us'])
        lines.append(f"| {label} | {nname(n)} | {b} | ≤ {lim:g} µs "
                     f"| {us:.1f} µs | "
                     f"{'**met**' if us <= lim else 'not met'} |")
    for label, op, from_n, least in GPU_RATIO_TARGETS:
        rows = [r for (n, b, o), r in d.items()
                if o == op and b == 1024 and n >= from_n and r['ratio']]
        where = f"≥ {nname(from_n)}" if from_n < (1 << 24) else nname(from_n)
        if not rows:
            lines.append(f"| {label} | {where} | 1024 | ≥ {least:g}x "
                         "| not measured | |")
            continue
        worst = min(float(r['ratio']) for r in rows)
        lines.append(f"| {label} | {where} | 1024 | ≥ {least:g}x "
                     f"| {worst:.2f}x (worst) | "
                     f"{'**met**' if worst >= least else 'not met'} |")
    n, big, small, factor = GPU_BIG_BATCH
    rb, rs = d.get((n, big, 'buffer')), d.get((n, small, 'buffer'))
    if rb and rs:
        x = float(rb['graph_us']) / float(rs['graph_us'])
        lines.append(f"| buffer step B = {big} ÷ B = {small} | {nname(n)} "
                     f"| {big} | ≤ {factor:g}x | {x:.2f}x | "
                     f"{'**met**' if x <= factor else 'not met'} |")
    else:
        lines.append(f"| buffer step B = {big} ÷ B = {small} | {nname(n)} "
                     f"| {big} | ≤ {factor:g}x | not measured | |")
    seed = seed_table(d, nname)
    return lines + ([""] + seed if seed else []) + [""]


if __name__ == '__main__':
    main()
