#!/usr/bin/env python3
"""check_resources.py NVCC SRC_DIR [nvcc args...]: compile per_cuda.cu for
sm_75, sm_80 and sm_90, PER_REAL double and float, with the build's flags
and nvcc --resource-usage, and check what ptxas made of every kernel:
  - no spill stores or loads: ptxas found the registers for everything
    it meant to keep in them (the subtree rebuilds hold up to 64 values
    each, and a kernel that spilled them would wait on memory for each).
    A stack frame (the draw's plan and cover, structs per.h's functions
    take by address) is printed, not refused;
  - fewer than 128 registers a thread: every kernel is declared
    __launch_bounds__(256, 2) (per_cuda.cu's PERI_CUDA_BOUNDS; the draw
    __maxnreg__(96)) and launched with 256 threads a block at most, so no launch
    is ever refused for its registers (a refusal halfway through a call
    is what per_cuda's error path has to mend), and two blocks of the
    heaviest kernel fit on an SM.
Prints one line per kernel (registers, spills, stack) and exits 1 on any
violation."""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

nvcc, src = sys.argv[1], sys.argv[2]
args = [a for a in sys.argv[3:]
        if not a.startswith('-gencode') and not a.startswith('arch=')
        and not a.startswith('-arch') and a not in ('-Werror', 'all-warnings')]
MAX_REGS = 127


def demangle(names):
    out = subprocess.run(['c++filt'], input='\n'.join(names),
                         capture_output=True, text=True)
    if out.returncode != 0:
        return names
    return [n.split('(')[0].replace('void ', '')
            for n in out.stdout.splitlines()]


def compile_one(arch, real):
    """ptxas's report for one target and node type: (command, result)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [nvcc, '-c', '-arch=sm_' + arch, '--resource-usage',
               '-I', src, '-DPER_REAL=' + real, *args,
               src + '/per_cuda.cu', '-o', tmp + '/per_cuda.o']
        return cmd, subprocess.run(cmd, capture_output=True, text=True)


targets = [(a, r) for a in ('75', '80', '90') for r in ('double', 'float')]
with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
    results = list(pool.map(lambda t: compile_one(*t), targets))
bad = 0
for (arch, real), (cmd, r) in zip(targets, results):
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        sys.exit(1)
    text = r.stdout + r.stderr
    kernels = []
    name = stack = spill = None
    for line in text.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            name = m.group(1)
        m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores,'
                      r' (\d+) bytes spill loads', line)
        if m:
            stack = int(m.group(1))
            spill = int(m.group(2)) + int(m.group(3))
        m = re.search(r'Used (\d+) registers', line)
        if m and name:
            kernels.append((name, int(m.group(1)), spill or 0, stack or 0))
            name = stack = spill = None
    if not kernels:
        print('check_resources: no kernels in the output of ' +
              ' '.join(cmd))
        sys.exit(1)
    for (mangled, regs, spill, stack), k in zip(
            kernels, demangle([k[0] for k in kernels])):
        problems = []
        if spill:
            problems.append('%d bytes spilled' % spill)
        if regs > MAX_REGS:
            problems.append('%d registers or more' % (MAX_REGS + 1))
        print('sm_%s %-6s %-44s %3d registers %4d B stack %s' % (
            arch, real, k[:44], regs, stack,
            'NOT OK: ' + ', '.join(problems) if problems else 'OK'))
        bad += bool(problems)
print('check_resources: %s' % ('NOT OK' if bad else 'OK'))
sys.exit(1 if bad else 0)
