#!/usr/bin/env python3
"""bench/gpu_report.py [RESULTS_DIR]: the GPU benchmark's CSVs
(gpu_double.csv, gpu_float.csv, written by bench_cuda --csv) as one
Markdown table on stdout: per row N, B and operation, the graph time of
per_cuda in microseconds for each node type, the launches, and the ratio
against the cumsum + binary-search baseline (above 1: per_cuda is
faster). gpu_machine.txt, when present, heads the table."""
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
             'step': 4, 'buffer': 5}
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
          'gathered) + update on a full buffer of N 16-byte items.')


if __name__ == '__main__':
    main()
