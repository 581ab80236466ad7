#!/usr/bin/env python3
"""bench/report.py [RESULTS_DIR [README]]: write the tables of
bench/README.md from the results in RESULTS_DIR (default bench/results)
into README (default bench/README.md; '-' prints the bench section only).
It measures nothing: `python3 bench/report.py` regenerates every table
from the committed results. Standard library only.

bench/report.py --peers-only [RESULTS_DIR]: print only the tables of per.h
against its peers (peers_double.csv, peers_float.csv from bench/peers.sh);
README is not touched.

Each section replaces the text between its two markers in README, and is
written only when its results are there:
    <!-- bench:begin --> ... <!-- bench:end -->    machine.txt, tree_*.csv,
        samplers_*.csv, replay_double.csv (+ .txt), huge_*.csv,
        curve_k.csv, memory_double.csv, memory_set_double.csv,
        hyperfine_*.md (bench/run.sh)
    <!-- peers:begin --> ... <!-- peers:end -->    peers_*.csv,
        peers_machine.txt (bench/peers.sh)
    <!-- python:begin --> ... <!-- python:end -->  peers_python.csv,
        peers_python_machine.txt (bench/peers_python.sh)
    <!-- mpi:begin --> ... <!-- mpi:end -->        mpi.csv, mpi_machine.txt
        (bench/mpi.sh)
    <!-- versions:begin --> ... <!-- versions:end -->
        versions_*_1.csv, versions_*_2.csv, versions_machine.txt
        (bench/versions.sh)
    <!-- gpu:begin --> ... <!-- gpu:end -->        gpu_double.csv,
        gpu_machine.txt (tools/gpu-check.sh), through
        bench/gpu_report.py's summary_lines
"""
import csv
import os
import re
import sys

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_report  # noqa: E402  (bench/gpu_report.py, beside this file)

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
PEERS_BEGIN = "<!-- peers:begin -->"
PEERS_END = "<!-- peers:end -->"
PYTHON_BEGIN = "<!-- python:begin -->"
PYTHON_END = "<!-- python:end -->"
VERSIONS_BEGIN = "<!-- versions:begin -->"
VERSIONS_END = "<!-- versions:end -->"
MPI_BEGIN = "<!-- mpi:begin -->"
MPI_END = "<!-- mpi:end -->"
GPU_BEGIN = "<!-- gpu:begin -->"
GPU_END = "<!-- gpu:end -->"

# The project's targets (single thread, default double tree unless stated):
# (label, csv file, op, N, B, limit in ns/item or None, minimum ratio
#  classic/per.h or None); categorical sampling has a per-batch limit.
TARGETS = [
    ("stratified sample", "tree_double", "sample", 65536, 1024, 15.0, 4.0),
    ("stratified sample", "tree_double", "sample", 1000000, 1024, 50.0, 2.0),
    ("stratified sample", "tree_double", "sample", 16777216, 1024, 100.0, 2.0),
    ("batch update", "tree_double", "update", 16777216, 1024, None, 1.0),
    ("add (one at a time: per_tree_set)", "tree_double", "add", 16777216, 0,
     8.0, None),
    ("add (runs of 1024: per_tree_set_range)", "tree_double", "addrun",
     16777216, 1024, 8.0, None),
    ("categorical w/o replacement", "samplers_double", "cat", 100000000, 1024,
     None, None),
    ("uniform swap w/o replacement", "samplers_double", "swap", 64000, 1024,
     1.7, None),
]
CAT_LIMIT_MS = 0.25  # per batch of 1024


def load(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def find(rows, op, n, b):
    for r in rows:
        if r["op"] == op and int(r["n"]) == n and int(r["b"]) == b:
            return r
    return None


def fnum(x, digits=1):
    x = float(x)
    if x == 0:
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.{digits}f}"
    return f"{x:.{max(digits, 2)}f}"


def nname(n):
    n = int(n)
    if n >= 1024 and n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    for e in range(3, 10):
        if n == 10 ** e:
            return f"10^{e}"
    return f"{n:,}"


def ratio(r):
    x = float(r["ratio"])
    return f"{x:.2f}x" if x > 0 else "-"


def tree_table(d, f, ops=("sample", "update", "add", "addrun")):
    out = ["| op | N | B | classic ns/item | per.h double ns/item | classic/per.h "
           "| per.h float ns/item | classic/per.h (float run) |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in d:
        if r["op"] not in ops:
            continue
        g = find(f, r["op"], int(r["n"]), int(r["b"]))
        b = r["b"] if int(r["b"]) else "-"
        out.append(
            f"| {r['op']} | {nname(r['n'])} | {b} | {fnum(r['base_ns'])} "
            f"| {fnum(r['per_ns'])} | {ratio(r)} "
            f"| {fnum(g['per_ns']) if g else '-'} | {ratio(g) if g else '-'} |")
    return out


def samplers_table(rows):
    out = ["| op | N | k | per.h µs/batch | per.h ns/item | baseline "
           "| baseline µs/batch | baseline ns/item | baseline/per.h |",
           "|---|---|---|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        if r["op"] == "threads":
            continue
        out.append(
            f"| {r['op']} | {nname(r['n'])} | {r['b']} "
            f"| {fnum(float(r['per_batch_ns']) / 1e3)} | {fnum(r['per_ns'])} "
            f"| {r['base_name']} | {fnum(float(r['base_batch_ns']) / 1e3)} "
            f"| {fnum(r['base_ns'])} | {ratio(r)} |")
    return out


def threads_table(d, f):
    out = ["| N | B | double: 1 thread µs | 2 threads µs | speed-up "
           "| float: 1 thread µs | 2 threads µs | speed-up |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in d:
        if r["op"] != "threads":
            continue
        g = find(f, "threads", int(r["n"]), int(r["b"]))
        cells = [nname(r["n"]), r["b"],
                 fnum(float(r["base_batch_ns"]) / 1e3),
                 fnum(float(r["per_batch_ns"]) / 1e3), ratio(r)]
        if g:
            cells += [fnum(float(g["base_batch_ns"]) / 1e3),
                      fnum(float(g["per_batch_ns"]) / 1e3), ratio(g)]
        else:
            cells += ["-", "-", "-"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def targets_table(data):
    out = ["| op | N | B / k | target | per.h (double) | per.h loops min–max "
           "| classic / baseline | ratio | met? |",
           "|---|---|---|---|---:|---:|---:|---:|---|"]
    for label, src, op, n, b, lim, rmin in TARGETS:
        r = find(data.get(src, []), op, n, b)
        bcol = str(b) if b else "-"
        if op == "cat":
            goal = f"≤ {CAT_LIMIT_MS} ms per batch"
        elif op == "update":
            goal = "≤ classic (ratio ≥ 1)"
        else:
            goal = f"≤ {lim:g} ns" + (f" (≥ {rmin:g}× classic)" if rmin else "")
        if not r:
            out.append(f"| {label} | {nname(n)} | {bcol} | {goal} | not measured "
                       "| | | | |")
            continue
        per, base, rat = float(r["per_ns"]), float(r["base_ns"]), float(r["ratio"])
        verdicts = []
        if op == "cat":
            ms = float(r["per_batch_ns"]) / 1e6
            shown = f"{ms:.3f} ms/batch"
            spread = (f"{float(r['per_min']) * b / 1e6:.3f}–"
                      f"{float(r['per_max']) * b / 1e6:.3f} ms")
            verdicts.append(ms <= CAT_LIMIT_MS)
            base_shown = f"{float(r['base_batch_ns']) / 1e6:.3f} ms/batch"
        else:
            shown = f"{fnum(per)} ns"
            spread = f"{fnum(r['per_min'])}–{fnum(r['per_max'])} ns"
            base_shown = f"{fnum(base)} ns" if base > 0 else "-"
            if lim is not None:
                verdicts.append(per <= lim)
            if rmin is not None:
                verdicts.append(rat >= rmin)
        met = all(verdicts)
        if met:
            verdict = "**met**"
        elif len(verdicts) == 2 and any(verdicts):
            verdict = ("not met (ns met, ratio not)" if verdicts[0]
                       else "not met (ratio met, ns not)")
        else:
            verdict = "not met"
        out.append(f"| {label} | {nname(n)} | {bcol} | {goal} | {shown} "
                   f"| {spread} | {base_shown} | {ratio(r)} | {verdict} |")
    return out


# bench_peers.csv: one row per (op, N, B, side); the sides as columns.
PEER_SIDES = (("per.h", "per.h"), ("textbook", "textbook"),
              ("torchrl", "TorchRL"), ("cpprb", "cpprb"))
PEER_OPS = ("update", "set", "sample", "step")


def peers_table(rows):
    """Markdown table of bench_peers rows: op / N / B, then ns per item of
    each side and best peer / per.h, the best peer being the fastest of
    TorchRL, cpprb and the textbook tree (above 1: per.h is faster)."""
    figs = {}
    for r in rows:
        key = (r["op"], int(r["n"]), int(r["b"]))
        figs.setdefault(key, {})[r["side"]] = float(r["ns"])
    head = " | ".join(f"{title} ns/item" for _, title in PEER_SIDES)
    out = [f"| op | N | B | {head} | best peer / per.h |",
           "|---|---|---|" + "---:|" * (len(PEER_SIDES) + 1)]

    def order(key):
        op, n, b = key
        return (PEER_OPS.index(op) if op in PEER_OPS else len(PEER_OPS), op,
                n, b)

    for key in sorted(figs, key=order):
        op, n, b = key
        f = figs[key]
        cells = [fnum(f[side]) if f.get(side, 0) > 0 else "-"
                 for side, _ in PEER_SIDES]
        peers = [(f[s], t) for s, t in (("torchrl", "TorchRL"),
                                        ("cpprb", "cpprb"),
                                        ("textbook", "textbook"))
                 if f.get(s, 0) > 0]
        per = f.get("per.h", 0)
        if peers and per > 0:
            best, who = min(peers)
            rat = f"{best / per:.2f}x ({who})"
        else:
            rat = "-"
        out.append(f"| {op} | {nname(n)} | {b if b else '-'} | "
                   + " | ".join(cells) + f" | {rat} |")
    return out


def curves_section(res):
    """Sampling without replacement as curves (curve_cat_n.csv,
    curve_k.csv): the plot, and the k curve's ratios as a table."""
    rows = load(os.path.join(res, "curve_k.csv"))
    if not rows:
        return []
    lines = ["### Sampling without replacement: time vs N and vs k "
             "(PER_REAL=double)", "",
             "The four panels of the sampling blog's runtime figure: "
             "categorical sampling of k = 1024 vs N (per_cat_sample against "
             "zero-and-restore on the classic float32 tree), categorical "
             "and uniform sampling vs k at N = 64000 (per_swap_sample "
             "against a hash-set rejection sampler), and the "
             "categorical/uniform ratio (the blog reports 25-30x for its "
             "zero-and-restore tree over its Fisher-Yates sampler).", "",
             "![sampling without replacement](results/samplers.png)", "",
             "| k | per_cat µs/batch | zero-and-restore µs/batch "
             "| per_swap µs/batch | per_cat / per_swap "
             "| zero-and-restore / per_swap |",
             "|---:|---:|---:|---:|---:|---:|"]
    cat = {int(r["b"]): r for r in rows if r["op"] == "cat"}
    swap = {int(r["b"]): r for r in rows if r["op"] == "swap"}
    for k in sorted(cat):
        c = cat[k]
        w = swap.get(k)
        pc, zc = float(c["per_batch_ns"]), float(c["base_batch_ns"])
        ps = float(w["per_batch_ns"]) if w else 0
        lines.append(
            f"| {k} | {fnum(pc / 1e3)} | {fnum(zc / 1e3)} "
            f"| {fnum(ps / 1e3) if ps else '-'} "
            f"| {f'{pc / ps:.1f}x' if ps else '-'} "
            f"| {f'{zc / ps:.1f}x' if ps else '-'} |")
    return lines + [""]


def memory_section(res):
    """bench_memory's figures (memory_double.csv): latency and throughput
    by working set, then per.h at its largest N beside the floor."""
    rows = load(os.path.join(res, "memory_double.csv"))
    if not rows:
        return []

    def size(b):
        b = int(b)
        for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
            if b >= 1 << sh and b % (1 << sh) == 0:
                return f"{b >> sh} {unit}"
        return f"{b} B"

    lines = ["### Where the memory limit is (bench_memory, double)", "",
             "chase: dependent loads over one random cycle of cache lines "
             "(latency); gather: independent loads of random lines "
             "(throughput); ns per load.", "",
             "| working set | chase ns/load | gather ns/load |",
             "|---|---:|---:|"]
    mem = {}
    for r in rows:
        if r["op"] in ("chase", "gather"):
            mem.setdefault(int(r["n"]), {})[r["op"]] = float(r["ns"])
    for b in sorted(mem):
        m = mem[b]
        lines.append(f"| {size(b)} | {fnum(m.get('chase', 0))} "
                     f"| {fnum(m.get('gather', 0))} |")
    lines += ["", "per.h beside a memory-only floor in the same process: "
              "the same kind of cache lines (B stratified root-to-leaf "
              "paths; for update, the B leaves and their ancestors "
              "recomputed level by level), every address known in "
              "advance, no arithmetic beyond the sums. floor / per.h is "
              "the fraction of the memory limit per.h reaches; "
              "latency-bound is depth x the chase over the tree's bytes, "
              "one descent alone with every level a miss.", "",
              "| op | N | B | per.h ns/item | floor ns/item | floor / per.h "
              "| latency-bound ns (one descent) |",
              "|---|---|---|---:|---:|---:|---:|"]
    figs = {}
    for r in rows:
        if r["op"] in ("sample", "update"):
            key = (r["op"], int(r["n"]), int(r["b"]))
            figs.setdefault(key, {})[r["side"]] = float(r["ns"])
    for key in sorted(figs):
        op, n, b = key
        f = figs[key]
        per, flo = f.get("per.h", 0), f.get("floor", 0)
        rat = f"{flo / per:.2f}" if per > 0 and flo > 0 else "-"
        lat = f.get("latency-bound", 0)
        lines.append(f"| {op} | {nname(n)} | {b} | {fnum(per)} | {fnum(flo)} "
                     f"| {rat} | {fnum(lat) if lat else '-'} |")
    return lines + [""]


def set_section(res):
    """bench_memory --op set (memory_set_double.csv): per_tree_set beside
    the bare exact walk, the delta walk and stores alone."""
    rows = load(os.path.join(res, "memory_set_double.csv"))
    figs = {}
    for r in rows:
        if r["op"] == "set":
            figs.setdefault(int(r["n"]), {})[r["side"]] = float(r["ns"])
    if not figs:
        return []
    lines = ["### One leaf at a time: what an exact walk costs "
             "(bench_memory --op set, double)", "",
             "A ring filled one leaf at a time, four sides in one process, "
             "interleaved, the same values in the same order: per.h's "
             "`per_tree_set`; exact, the least code with its bits (a plain "
             "loop, each parent the value just computed plus its sibling, "
             "no checks, inlined where per_tree_set is a call: a chain of "
             "dependent adds); delta, the textbook "
             "walk at the same width (the change added to every ancestor: "
             "independent read-modify-writes, sums that drift); stores, "
             "the same lines written with no loads or adds. exact / per.h "
             "is what per_tree_set's call and checks cost (1: nothing); "
             "exact / delta, what exact sums cost.", "",
             "| N | per.h ns/leaf | exact ns/leaf | delta ns/leaf "
             "| stores ns/leaf | exact / per.h | exact / delta |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for n in sorted(figs):
        f = figs[n]
        per, ex = f.get("per.h", 0), f.get("exact", 0)
        de, st = f.get("delta", 0), f.get("stores", 0)
        r1 = f"{ex / per:.2f}" if per > 0 and ex > 0 else "-"
        r2 = f"{ex / de:.2f}" if de > 0 and ex > 0 else "-"
        lines.append(f"| {nname(n)} | {fnum(per)} | {fnum(ex)} | {fnum(de)} "
                     f"| {fnum(st)} | {r1} | {r2} |")
    return lines + [""]


def replay_section(res):
    """bench_replay's figures (replay_double.csv; the item and snapshot
    sizes from replay_double.txt when it is there), as lines."""
    rows = load(os.path.join(res, "replay_double.csv"))
    if not rows:
        return []
    txt = os.path.join(res, "replay_double.txt")
    text = open(txt).read() if os.path.exists(txt) else ""
    m = re.search(r"(\d+)-byte items", text)
    item = f"{m.group(1)}-byte items" if m else "items"
    n = nname(rows[0]["n"])
    m = re.search(r"L = (\d+), stride (\d+)", text)
    seq = f"L = {m.group(1)} steps, stride {m.group(2)}" if m else "L steps"
    lines = ["### Snapshots, saves and sequences (bench_replay)", "",
             f"A full buffer of {n} {item}, double. snapshot: "
             "`per_buffer_snapshot` (the whole checkpoint into memory) "
             "against a memcpy of the same bytes; save: the same snapshot "
             "against the synchronous `per_buffer_save` (checksum, write, "
             "fsync, rename), the time `per_snapshot_write` takes off the "
             "training thread; seq: a sequence training step "
             f"(`per_buffer_sample` of B sequences of {seq}, + "
             "`per_buffer_update_seq`) against sampling and updating the "
             "same B x L steps as independent items (ns per step).", "",
             "| op | N | B | per.h | µs per call | ns per item "
             "| baseline | µs per call | ns per item | baseline / per.h |",
             "|---|---|---|---|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        b = r["b"] if int(r["b"]) else "-"
        lines.append(
            f"| {r['op']} | {nname(r['n'])} | {b} | {r['per_name']} "
            f"| {fnum(float(r['per_batch_ns']) / 1e3)} | {fnum(r['per_ns'])} "
            f"| {r['base_name']} | {fnum(float(r['base_batch_ns']) / 1e3)} "
            f"| {fnum(r['base_ns'])} | {ratio(r)} |")
    m = re.search(r"snapshot (\d+) MB \((\d+) bytes per item\)", text)
    snap = find(rows, "snapshot", int(rows[0]["n"]), 0)
    if m and snap:
        per_item = int(m.group(2))
        gbs = [per_item / float(snap[k]) for k in ("per_ns", "base_ns")]
        lines += ["", f"snapshot: {m.group(1)} MB ({per_item} bytes per item) "
                  f"at {gbs[0]:.2f} GB/s, memcpy at {gbs[1]:.2f} GB/s."]
    return lines + [""]


def peers_summary(rows_by_real):
    """One line per op and node type summing up the peers tables: the
    range over every (N, B) of each peer's time / per.h's and of the best
    peer's, and the rows where the best peer is faster."""
    out = ["What the tables below hold, in ranges over every N and B "
           "(time / per.h's: above 1, per.h is faster; behind: the rows "
           "where the best peer is faster).", "",
           "| op | PER_REAL | best peer / per.h | behind | TorchRL / per.h "
           "| cpprb / per.h | textbook / per.h |",
           "|---|---|---:|---|---:|---:|---:|"]
    for op in PEER_OPS:
        for real, rows in rows_by_real:
            figs = {}
            for r in rows:
                if r["op"] == op:
                    figs.setdefault((int(r["n"]), int(r["b"])),
                                    {})[r["side"]] = float(r["ns"])
            rat = {s: [] for s in ("best", "torchrl", "cpprb", "textbook")}
            behind = []
            for key in sorted(figs):
                f = figs[key]
                per = f.get("per.h", 0)
                if per <= 0:
                    continue
                peers = [f[s] for s in ("torchrl", "cpprb", "textbook")
                         if f.get(s, 0) > 0]
                for s in ("torchrl", "cpprb", "textbook"):
                    if f.get(s, 0) > 0:
                        rat[s].append(f[s] / per)
                if peers:
                    rat["best"].append(min(peers) / per)
                    if min(peers) < per:
                        behind.append(key)
            if not rat["best"]:
                continue

            def span(v):
                return (f"{min(v):.2f}x–{max(v):.2f}x" if v else "-")

            if len(behind) <= 3:
                where = ", ".join(f"{nname(n)}" + (f"/{b}" if b else "")
                                  for n, b in behind)
                nb = f"{len(behind)} of {len(rat['best'])}" + (
                    f": {where}" if behind else "")
            else:
                nb = f"{len(behind)} of {len(rat['best'])}"
            out.append(f"| {op} | {real} | {span(rat['best'])} | {nb} "
                       f"| {span(rat['torchrl'])} | {span(rat['cpprb'])} "
                       f"| {span(rat['textbook'])} |")
    return out + [""]


def measured_with(path):
    """A "Measured with: ..." paragraph from a machine file's lines, as
    lines; nothing when the file is not there."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return ["Measured with: " + "; ".join(
            l.strip() for l in f if l.strip()) + ".", ""]


def peers_section(res):
    """The peers tables of RESULTS_DIR (double, then float), as lines; an
    empty list when neither CSV exists."""
    lines = measured_with(os.path.join(res, "peers_machine.txt"))
    by_real = [(real, load(os.path.join(res, f"peers_{real}.csv")))
               for real in ("double", "float")]
    by_real = [(real, rows) for real, rows in by_real if rows]
    if by_real:
        lines += peers_summary(by_real)
    for real, rows in by_real:
        lines += [f"### per.h against its peers, PER_REAL={real} "
                  "(median ns per item)", "",
                  "TorchRL 0.10.0 and cpprb 11.0.0 C++ sum trees with the "
                  f"same {real} leaves, the textbook float32 tree, per.h; "
                  "one process, same inputs, interleaved "
                  "(bench/bench_peers.cpp via bench/peers.sh). best peer = "
                  "the fastest of TorchRL, cpprb and the textbook tree.", ""]
        lines += peers_table(rows) + [""]
    if os.path.exists(os.path.join(res, "peers.png")):
        lines += ["![per.h vs the peers, ns per item vs N](results/peers.png)",
                  ""]
    return lines


def section(res):
    data = {k: load(os.path.join(res, k + ".csv"))
            for k in ("tree_double", "tree_float", "samplers_double",
                      "samplers_float")}
    lines = [BEGIN,
             "<!-- generated by bench/report.py from bench/results/; "
             "edit the script, not this section -->", ""]
    mpath = os.path.join(res, "machine.txt")
    if os.path.exists(mpath):
        lines += ["### Machine and build", ""]
        with open(mpath) as f:
            for ln in f:
                ln = ln.rstrip("\n")
                if ln:
                    lines.append(f"- {ln}")
        lines.append("")
    lines += ["### Targets", ""] + targets_table(data) + [
        "",
        "ratio = baseline time / per.h time (above 1: per.h is faster), "
        "both measured in the same run, interleaved, same inputs.", ""]
    if data["tree_double"]:
        lines += ["### Sum tree: per.h vs the classic float32 tree "
                  "(median ns per item)", ""]
        lines += tree_table(data["tree_double"], data["tree_float"])
        lines += ["", "Each program measures the classic tree again beside "
                  "its own per.h; the classic column is the double run's.",
                  "", "![ns per item vs N](results/tree.png)", ""]
    if any(r["op"] == "cycle" for r in data["tree_double"]):
        lines += ["### PER buffer training step: sample B + update B "
                  "(median ns per item)", "",
                  "per.h: per_buffer_sample (ids, IS weights) + "
                  "per_buffer_update on a full buffer of N items; classic: "
                  "the same step on the classic float32 tree (stratified "
                  "sample, powf weights normalized by the batch max, powf "
                  "priorities, B delta updates).", ""]
        lines += tree_table(data["tree_double"], data["tree_float"],
                            ops=("cycle",))
        lines += [""]
    lines += replay_section(res)
    huge = load(os.path.join(res, "huge_tree_double.csv")) + load(
        os.path.join(res, "huge_samplers_double.csv"))
    if huge:
        lines += ["### Huge pages (double; both sides' trees in 2 MiB-aligned "
                  "memory with madvise(MADV_HUGEPAGE), `--huge`)", "",
                  "| op | N | B / k | per.h ns/item, malloc | per.h ns/item, "
                  "huge pages | baseline ns/item, huge pages | baseline/per.h |",
                  "|---|---|---|---:|---:|---:|---:|"]
        plain = data["tree_double"] + data["samplers_double"]
        for r in huge:
            p0 = find(plain, r["op"], int(r["n"]), int(r["b"]))
            lines.append(
                f"| {r['op']} | {nname(r['n'])} | {r['b']} "
                f"| {fnum(p0['per_ns']) if p0 else '-'} | {fnum(r['per_ns'])} "
                f"| {fnum(r['base_ns'])} | {ratio(r)} |")
        lines += ["", "per.h takes caller memory through per_tree_init_mem "
                  "(the benchmark allocates it with posix_memalign and "
                  "madvise). Elsewhere these programs build per.h with "
                  "PER_NO_HUGE_PAGES, so that it sits on the baselines' "
                  "4 KiB pages; per.h's default allocator gives a user's "
                  "large trees and arrays huge pages by itself.", ""]
    for real in ("double", "float"):
        rows = data["samplers_" + real]
        if rows:
            lines += [f"### Samplers, PER_REAL={real}", ""]
            lines += samplers_table(rows) + [""]
    lines += curves_section(res)
    if any(r["op"] == "threads" for r in data["samplers_double"]):
        lines += ["### Stratified sampling split over 2 threads "
                  "(per_tree_sample_strata, µs per batch)", ""]
        lines += threads_table(data["samplers_double"], data["samplers_float"])
        lines += [""]
    lines += memory_section(res) + set_section(res)
    for name, title in (("demo", "examples/per_demo"),
                        ("dqn", "examples/dqn_cartpole, 10,000 training "
                                "steps, prioritized vs uniform replay"),
                        ("sample", "1000 stratified batches of 1024 from 2^24 "
                                   "leaves, whole program (set-up included)"),
                        ("update", "2000 batch updates of 1024 on 2^24 leaves, "
                                   "whole program (set-up included)")):
        p = os.path.join(res, f"hyperfine_{name}.md")
        if os.path.exists(p):
            lines += [f"### hyperfine: {title}", ""]
            with open(p) as f:
                lines += [ln.rstrip("\n") for ln in f if ln.strip()]
            lines += [""]
    lines.append(END)
    return "\n".join(lines) + "\n"


def label(side):
    return {"torchrl": "TorchRL"}.get(side, side)


def python_section(res):
    """The table of per's Python package against cpprb's and TorchRL's
    PrioritizedReplayBuffer (peers_python.csv from bench/peers_python.sh),
    as lines; an empty list when the CSV is not there."""
    rows = load(os.path.join(res, "peers_python.csv"))
    if not rows:
        return []
    lines = measured_with(os.path.join(res, "peers_python_machine.txt"))
    sides = []
    figs = {}
    for r in rows:
        if r["side"] not in sides:
            sides.append(r["side"])
        figs.setdefault((int(r["n"]), int(r["b"])), {})[r["side"]] = r
    peers = [s for s in sides if s != "per"]
    lines += ["Microseconds per batch (median; min-max): sample B with IS "
              "weights, then update B priorities; thread CPU time. peer / "
              "per above 1: per is faster.", "",
              "| N | B | " + " | ".join(f"{label(s)} µs" for s in sides) + " | "
              + " | ".join(f"{label(s)} / per" for s in peers) + " |",
              "|---|---|" + "---:|" * (len(sides) + len(peers))]
    for (n, b), f in sorted(figs.items()):
        cells = [f"{fnum(f[s]['us_med'])} ({fnum(f[s]['us_min'])}–"
                 f"{fnum(f[s]['us_max'])})" if s in f else "-" for s in sides]
        per_us = float(f["per"]["us_med"])
        ratios = [f"{float(f[s]['us_med']) / per_us:.2f}x" if s in f else "-"
                  for s in peers]
        lines.append(f"| {nname(n)} | {b} | " + " | ".join(cells) + " | "
                     + " | ".join(ratios) + " |")
    return lines + [""]


def mpi_section(res):
    """The table of per_mpi.h's sample + update per batch on 1, 2 and 4
    ranks against one per_buffer (mpi.csv from bench/mpi.sh), as lines;
    an empty list when the CSV is not there."""
    rows = load(os.path.join(res, "mpi.csv"))
    if not rows:
        return []
    lines = measured_with(os.path.join(res, "mpi_machine.txt"))
    r0 = rows[0]
    lines += [f"Microseconds per batch on rank 0 (median of "
              f"{r0['rounds']} rounds, wall clock): one `per_mpi_sample` "
              f"of B = {r0['b']} to rank 0 and one `per_mpi_update` of "
              f"its B TD errors, {nname(int(r0['n']))} items of "
              f"{r0['item']} bytes per rank; the time inside MPI's "
              "collectives (measured through the profiling interface) "
              "and the rest (local); one `per_buffer` of W x N items "
              "doing the same sample + update in the same run; and "
              "their ratio.", "",
              "| ranks W | items in all | per_mpi µs | collectives µs | "
              "local µs | one per_buffer µs | per_mpi / one |",
              "|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        w, n = int(r["w"]), int(r["n"])
        tot, one = float(r["total_us"]), float(r["single_us"])
        lines.append(f"| {w} | {nname(w * n)} | {fnum(tot)} | "
                     f"{fnum(float(r['coll_us']))} | "
                     f"{fnum(float(r['local_us']))} | {fnum(one)} | "
                     f"{tot / one:.2f}x |")
    return lines + [""]


def versions_section(res):
    """The table of this per.h's buffer against an earlier per.h's
    (versions_REAL_1.csv and _2.csv from bench/versions.sh: the program
    linked with each side first), as lines; an empty list when no CSV is
    there."""
    lines = []
    for real in ("double", "float"):
        runs = [load(os.path.join(res, f"versions_{real}_{k}.csv"))
                for k in (1, 2)]
        if not runs[0] or len(runs[0]) != len(runs[1]):
            continue
        if not lines:
            lines = measured_with(os.path.join(res, "versions_machine.txt"))
            lines += ["Median ns per item, both per.h in one process, "
                      "interleaved. step: `per_buffer_sample` of B (ids, IS "
                      "weights) + `per_buffer_update` of those ids; update: "
                      "`per_buffer_update` of B ids of random slots from B "
                      "TD errors. Full buffer of N 4-byte items, alpha 0.6, "
                      "the scheduled beta. The program is linked twice, "
                      "each side's code first once (where the code lands "
                      "moves a figure by up to 20 %): ns are the mean of "
                      "the two runs, other / this the geometric mean of "
                      "their ratios (above 1: this per.h is faster), then "
                      "each run's ratio.", ""]
        lines += [f"PER_REAL={real}:", "",
                  "| op | N | B | this ns/item | other ns/item | "
                  "other / this | this first | other first |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r1, r2 in zip(*runs):
            q1, q2 = float(r1["ratio"]), float(r2["ratio"])
            this = (float(r1["per_ns"]) + float(r2["per_ns"])) / 2
            other = (float(r1["base_ns"]) + float(r2["base_ns"])) / 2
            lines.append(f"| {r1['op']} | {nname(r1['n'])} | {r1['b']} | "
                         f"{fnum(this)} | {fnum(other)} | "
                         f"{(q1 * q2) ** 0.5:.2f}x | {q1:.2f}x | {q2:.2f}x |")
        lines.append("")
    return lines


def between(text, begin, end, body, source):
    """text with the part between the markers begin and end replaced by
    body (a list of lines) under a generated-by comment; text unchanged
    when a marker is missing."""
    if begin not in text or end not in text:
        return text
    pre = text[:text.index(begin) + len(begin)]
    post = text[text.index(end):]
    return (pre + f"\n<!-- generated by bench/report.py from {source}; "
            "edit the script, not this section -->\n\n"
            + "\n".join(body) + "\n" + post)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    args = sys.argv[1:]
    peers_only = "--peers-only" in args
    args = [a for a in args if a != "--peers-only"]
    res = args[0] if args else os.path.join(here, "results")
    if peers_only:
        lines = peers_section(res)
        if not lines:
            sys.stderr.write(f"report: no peers_double.csv or peers_float.csv "
                             f"in {res} (run bench/peers.sh)\n")
            return 1
        sys.stdout.write("\n".join(lines))
        return 0
    readme = args[1] if len(args) > 1 else os.path.join(here, "README.md")
    sec = section(res)
    if readme == "-":
        sys.stdout.write(sec)
        return 0
    text = open(readme).read() if os.path.exists(readme) else ""
    peers = peers_section(res)
    if peers:
        text = between(text, PEERS_BEGIN, PEERS_END, peers, "peers_*.csv")
    python = python_section(res)
    if python:
        text = between(text, PYTHON_BEGIN, PYTHON_END, python,
                       "peers_python.csv")
    mpi = mpi_section(res)
    if mpi:
        text = between(text, MPI_BEGIN, MPI_END, mpi, "mpi.csv")
    versions = versions_section(res)
    if versions:
        text = between(text, VERSIONS_BEGIN, VERSIONS_END, versions,
                       "versions_*.csv")
    gpu = gpu_report.summary_lines(res, nname)
    if gpu:
        gpu = measured_with(os.path.join(res, "gpu_machine.txt")) + gpu
        text = between(text, GPU_BEGIN, GPU_END, gpu,
                       "gpu_*.csv through bench/gpu_report.py")
    if BEGIN in text and END in text:
        pre = text[:text.index(BEGIN)]
        post = text[text.index(END) + len(END):].lstrip("\n")
        text = pre + sec + ("\n" + post if post else "")
    else:
        text = text + ("\n" if text and not text.endswith("\n") else "") + sec
    with open(readme, "w") as f:
        f.write(text)
    print(f"report: updated {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
