#!/usr/bin/env python3
"""bench/gpu_report.py [RESULTS_DIR]: the GPU benchmark's CSVs
(gpu_double.csv, gpu_float.csv, written by bench_cuda --csv) as one
Markdown table on stdout: per row N, B and operation, the graph time of
per_cuda in microseconds for each node type, the launches, and the ratio
against the cumsum + binary-search baseline (above 1: per_cuda is
faster). gpu_machine.txt, when present, heads the table.
tools/gpu-check.sh writes that table to RESULTS_DIR/gpu.md.

bench/gpu_report.py --check LOGDIR [RESULTS_DIR [BUDGET]]: the report of
tools/gpu-check.sh --all on stdout (it writes it to RESULTS_DIR/gpu.md
after every stage): a header from gpu_machine.txt (date, commit, the
sha256 of per.h and per_cuda.*, GPU, driver, nvcc), the stages planned in
LOGDIR/plan with the verdicts, seconds and notes of LOGDIR/stages.tsv
(tab-separated: name, verdict, seconds, log files, note; a planned stage
without a line there is "not run yet"), then a section per stage with the
key lines of its log (LOGDIR/NAME.log): the GPU tests from meson's
testlog.json, each sanitizer's summary, the probes' PASS / FAIL /
SKIP / WEAK lines, the benchmark table above, per.cuda's test summary,
the DQN example's solve line and RESULTS_DIR/peers_cuda.md; the last
lines of the log of a stage that did not pass.

summary_lines(RESULTS_DIR, nname) gives the shorter section of bench/README.md
(between <!-- gpu:begin --> and <!-- gpu:end -->): the double rows at
B = 1024 and 65536, and the targets; bench/report.py writes it."""
import csv
import json
import os
import re
import sys
import time


def load(path):
    if not os.path.exists(path):
        return {}
    with open(path, newline='') as f:
        return {(int(r['N']), int(r['B']), r['op']): r
                for r in csv.DictReader(f)}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--check':
        if len(sys.argv) < 3:
            sys.exit('usage: gpu_report.py --check LOGDIR [RESULTS_DIR '
                     '[BUDGET]]')
        out = sys.argv[3] if len(sys.argv) > 3 else default_results()
        budget = sys.argv[4] if len(sys.argv) > 4 else None
        print('\n'.join(check_lines(sys.argv[2], out, budget)))
        return
    out = sys.argv[1] if len(sys.argv) > 1 else default_results()
    machine = os.path.join(out, 'gpu_machine.txt')
    if os.path.exists(machine):
        for line in open(machine):
            print('    ' + line.rstrip())
        print()
    print('\n'.join(table_lines(out)))


def default_results():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'results')


def table_lines(out):
    """The benchmark's Markdown table and its notes, from out's CSVs."""
    d = load(os.path.join(out, 'gpu_double.csv'))
    f = load(os.path.join(out, 'gpu_float.csv'))
    lines = ['| N | B | op | double µs | launches | × baseline | '
             'float µs | × baseline |',
             '|---:|---:|---|---:|---:|---:|---:|---:|']
    order = {'update': 0, 'update_td': 1, 'sample': 2, 'weights': 3,
             'step': 4, 'buffer': 5, 'buffer_cpu': 6, 'buf_sample': 7,
             'unique': 8, 'seq_step': 9}
    keys = sorted(set(d) | set(f), key=lambda k: (k[0], k[1], order.get(
        k[2], 9)))

    def ratio(r):
        return (r['ratio'] + 'x') if r and r['ratio'] else '–'

    for k in keys:
        rd, rf = d.get(k), f.get(k)
        lines.append('| {} | {} | {} | {} | {} | {} | {} | {} |'.format(
            k[0], k[1], k[2],
            rd['graph_us'] if rd else '–',
            (rd or rf)['launches'], ratio(rd),
            rf['graph_us'] if rf else '–', ratio(rf)))
    lines += ['', 'Graph replay times (CUDA events, mean of 50 replays); the '
              'baseline is a CUB inclusive scan over all N priorities plus B '
              'binary searches (sample), a scatter (update), or both (step, '
              'buffer). buffer: per_cuda_buffer add_batch + sample (items '
              'gathered) + update on a full buffer of N 16-byte items; '
              'buffer_cpu: the same row against per.h\'s per_buffer doing '
              'the same step on the CPU (one thread) in the same run; '
              'buf_sample: per_cuda_buffer_sample alone (items gathered, '
              'weights) against the scan + search; unique: the same with '
              'PER_SAMPLE_UNIQUE (B <= 1024; one thread makes the picks) '
              'against buf_sample; seq_step: an R2D2 step (add 64 steps, '
              'sample B = 64 sequences of 64 steps every 32 with masks, '
              'update_seq their TD errors) against per.h\'s per_buffer '
              'doing it on the CPU.']
    seed = seed_table(d, str)
    if seed:
        lines += [''] + seed
    return lines


def read_lines(path):
    """A file's lines without their ends; none when it is not there."""
    try:
        with open(path, errors='replace') as f:
            return f.read().splitlines()
    except OSError:
        return []


FENCE = '`' * 3


def block(lines):
    """Lines as a fenced block (nothing for no lines)."""
    if not lines:
        return []
    return [FENCE] + [x.replace(FENCE, "'" * 3) for x in lines] + [FENCE]


def tail(lines, n=30):
    return lines[-n:]


def key_or_all(keep, log, ok, n=20):
    """A stage's key lines; when it did not pass, its whole log if short,
    else the key lines and its last n lines."""
    if ok and keep:
        return keep
    if len(log) <= 2 * n:
        return log
    return keep + ['...'] + tail(log, n)


def machine_lines(out):
    """The report's header from gpu_machine.txt (key: value lines)."""
    m = {}
    for line in read_lines(os.path.join(out, 'gpu_machine.txt')):
        k, sep, v = line.partition(': ')
        if sep:
            m.setdefault(k, []).append(v)
    one = {k: v[0] for k, v in m.items()}
    sha = ', '.join(f"{k.split(' ')[0]} {one[k][:12]}" for k in
                    ('per.h sha256', 'per_cuda.h sha256',
                     'per_cuda.cu sha256') if k in one)
    return [f"- date (UTC): {one.get('date', 'unknown')}",
            f"- commit: {one.get('commit', 'unknown')}",
            f"- sha256 (first 12 digits): {sha or 'unknown'}",
            "- GPU (name, driver, memory, max SM clock): "
            f"{'; '.join(m.get('gpu', ['unknown']))}",
            f"- nvcc: {one.get('nvcc', 'unknown')}"]


def probe_lines(lines):
    """The probes' verdict lines and their program's own lines."""
    return [x for x in lines
            if re.match(r'(PASS|FAIL|SKIP|WEAK)\b|gpu_probes: ', x)]


def tests_lines(logdir):
    """The GPU tests from meson's testlog.json: one row each."""
    rows = []
    for line in read_lines(os.path.join(logdir, 'testlog.json')):
        try:
            t = json.loads(line)
        except ValueError:
            continue
        said = [x for x in (t.get('stdout') or '').splitlines() if x.strip()]
        rows.append('| {} | {} | {:.1f} | {} |'.format(
            t.get('name', '?'), t.get('result', '?'),
            float(t.get('duration') or 0),
            (said[-1] if said else '').replace('|', '/')))
    if not rows:
        return []
    return ['| test | result | s | its last line |', '|---|---|---:|---|'] \
        + rows


def stage_lines(name, verdict, logdir, out):
    """The key lines of one stage's log (its last lines when it did not
    pass)."""
    log = read_lines(os.path.join(logdir, name + '.log'))
    ok = verdict == 'PASS'
    if name == 'build':
        py = read_lines(os.path.join(logdir, 'pybuild.rc'))
        pyrc = py[0].split()[0] if py else '?'
        lines = block(log[-2:] if ok else tail(log))
        lines += ['', "per.cuda's extensions (tools/gpu-python.sh "
                  f"--build-only): exit status {pyrc}"]
        if pyrc != '0':
            lines += block(tail(read_lines(
                os.path.join(logdir, 'pybuild.log'))))
        return lines
    if name == 'tests':
        return tests_lines(logdir) + ([] if ok else [''] + block(tail(log)))
    if name in ('memcheck', 'racecheck', 'synccheck'):
        keep = [x for x in log if 'SUMMARY' in x] + probe_lines(log)
        return block(key_or_all(keep, log, ok))
    if name.startswith('probes_'):
        return block(key_or_all(probe_lines(log), log, ok))
    if name.startswith('bench_'):
        return block(log[:1] if ok else tail(log, 20))
    if name == 'pytests':
        keep = [x for x in log
                if re.search(r'\d+ (passed|failed|errors?|skipped)', x)]
        return block(keep[-1:] if ok and keep else tail(log))
    if name == 'dqn':
        keep = [x for x in log if re.match(
            r'(gpu_dqn_cartpole:|solved|not solved|replay:|exit status|== )',
            x)]
        return block(key_or_all(keep, log, ok))
    if name == 'peers':
        md = read_lines(os.path.join(out, 'peers_cuda.md'))
        return md if ok and md else block(tail(log))
    return block(tail(log, 20))


def check_lines(logdir, out, budget):
    """The report of tools/gpu-check.sh --all (see the top comment)."""
    plan = [x for x in read_lines(os.path.join(logdir, 'plan')) if x]
    done = {}
    for line in read_lines(os.path.join(logdir, 'stages.tsv')):
        f = line.split('\t')
        if len(f) >= 5:
            done[f[0]] = {'verdict': f[1], 'secs': f[2], 'note': f[4]}
    plan += [n for n in done if n not in plan]
    start = read_lines(os.path.join(logdir, 'start'))
    spent = f"{int(time.time()) - int(start[0])} s" if start else '?'
    passed = sum(1 for n in plan if done.get(n, {}).get('verdict') == 'PASS')
    lines = ['# GPU check (tools/gpu-check.sh --all)', ''] + \
        machine_lines(out) + \
        [f"- result: {passed} of {len(plan)} stages passed"
         f"{'' if len(done) == len(plan) else ' (the run is not finished)'}"
         f"; {spent} spent of a budget of {budget or '?'} s", '',
         '| stage | verdict | s | note |', '|---|---|---:|---|']
    for n in plan:
        s = done.get(n)
        lines.append(f"| {n} | {s['verdict']} | {s['secs']} | "
                     f"{s['note'].replace('|', '/')} |" if s
                     else f"| {n} | not run yet | | |")
    last_bench = [n for n in plan if n.startswith('bench_')][-1:]
    for n in plan:
        s = done.get(n)
        if not s:
            continue
        lines += ['', f"## {n}: {s['verdict']} ({s['secs']} s)", '']
        lines += stage_lines(n, s['verdict'], logdir, out)
        if [n] == last_bench and any(
                os.path.exists(os.path.join(out, f'gpu_{r}.csv'))
                for r in ('double', 'float')):
            lines += ['', '### The benchmark table', ''] + table_lines(out)
    return lines


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
