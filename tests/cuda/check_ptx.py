#!/usr/bin/env python3
"""check_ptx.py NVCC SRC_DIR [nvcc args...]: compile per_cuda.cu to PTX
(compute_75, the oldest GPU of gpu_arch's default, compute_80 and
compute_90, PER_REAL double and float) with the build's
flags and check what the host build and the bitwise contract rely on, for
every kernel (.entry):
  - IEEE arithmetic as on the CPU: no fused multiply-add (fma, float mad),
    no flush to zero (.ftz), no approximate division or reciprocal
    (.approx, div.full), per.h's pow included (it is inlined like the
    rest); no call;
  - no shared memory, no barrier, no warp shuffle/vote/match: threads of a
    launch do not cooperate, so running them one by one (the shim) is a
    faithful schedule; but for the kernels with a block's cooperative
    section (per_cuda.cu's >>block: SECTIONS below), which may have
    shared memory and whole-block barriers (bar.sync 0, __syncthreads)
    and nothing else of the kind, so that the shim's lane-by-lane run
    between two barriers stays a faithful schedule;
  - atomics only of the integer kinds the shim emulates (max, min, cas,
    exch, and add on 32-bit unsigned integers, red.add when its result is
    unused).
The kernels must hold no fma whatever -fmad says (per.h rounds every
product it adds to by __dmul_rn / __fmul_rn on the device, which nvcc
never fuses), so compute_90 is also compiled with -fmad=true, nvcc's
default, in place of the build's -fmad=false ("fmad" in the lines).
Prints one line per kernel and exits 1 on any violation."""
import os
import re
import subprocess
import sys
import tempfile

nvcc, src = sys.argv[1], sys.argv[2]
# The kernels with a cooperative section (a sample's uniform draws).
SECTIONS = ('peri_cuda_draw_kernel',)
args = [a for a in sys.argv[3:]
        if not a.startswith('-gencode') and not a.startswith('arch=')
        and a not in ('-Werror', 'all-warnings')]


def kernel_name(mangled):
    """The kernel's name from its mangled one: _Z<length><name>, then the
    template arguments of the templated kernels (bools and integer
    types); anything else as it is."""
    m = re.match(r'_Z(\d+)', mangled)
    if not m:
        return mangled
    end = m.end() + int(m.group(1))
    name = mangled[m.end():end]
    t = re.match(r'I((?:Lb[01]E|[a-z])+)E', mangled[end:])
    if t:
        names = {'Lb1E': 'true', 'Lb0E': 'false', 'j': 'uint32_t',
                 'h': 'unsigned char'}
        args = re.findall(r'Lb[01]E|[a-z]', t.group(1))
        name += '<%s>' % ', '.join(names.get(a, a) for a in args)
    return name


bad = 0
runs = [(a, r, False) for a in ('75', '80', '90') for r in ('double', 'float')]
runs += [('90', r, True) for r in ('double', 'float')]
for arch, real, fmad in runs:
    flags = args
    if fmad:
        flags = [a for a in args if not a.startswith('-fmad')] + ['-fmad=true']
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'per_cuda.ptx')
        cmd = [nvcc, '-ptx', '-arch=compute_' + arch, '-I', src,
               '-DPER_REAL=' + real,
               *flags, os.path.join(src, 'per_cuda.cu'), '-o', out]
        subprocess.run(cmd, check=True)
        ptx = open(out).read()
    entries = re.findall(r'\.entry\s+(\w+)\((.*?)\n\}', ptx, re.S)
    if not entries:
        print('no kernels found in the PTX')
        sys.exit(1)
    for name, body in entries:
        code = re.sub(r'//[^\n]*', '', body)
        problems = []
        if re.search(r'\bfma\.', code):
            problems.append('fma')
        if re.search(r'\bmad\.(?:\w+\.)*f(?:32|64)\b', code):
            problems.append('float mad')
        if re.search(r'\.ftz\b', code):
            problems.append('flush to zero')
        if re.search(r'\.approx\b|\bdiv\.full\b', code):
            problems.append('approximate arithmetic')
        section = any(k in name for k in SECTIONS)
        if '.shared' in body and not section:
            problems.append('shared memory')
        bars = re.findall(r'\b(?:bar|barrier)\.[^;]*;', code)
        if any(not section or not re.fullmatch(r'bar\.sync\s+0;', b)
               for b in bars):
            problems.append('barrier ' + ' '.join(sorted(set(bars))))
        if re.search(r'\b(shfl|vote|match|redux)\.', body):
            problems.append('warp collective')
        # atom[.sem][.scope][.space].op.type: keep op (and type for floats)
        atoms = set()
        for parts in re.findall(r'\batom((?:\.\w+)+)', code):
            ops = [w for w in parts.split('.') if w in (
                'max', 'min', 'add', 'inc', 'dec', 'cas', 'exch', 'and', 'or',
                'xor')]
            kind = ops[0] if ops else 'unknown'
            if re.search(r'\.f(?:16|32|64)\b|\.bf16', parts):
                kind += '.float'
            atoms.add(kind)
        # an integer atomicAdd whose result is unused compiles to red.add
        for parts in re.findall(r'\bred((?:\.\w+)+)', code):
            if not re.search(r'\.add\.u32$', parts):
                problems.append('reduction atomic red' + parts)
            atoms.add('add')
        atoms = sorted(atoms)
        if any(a not in ('max', 'min', 'cas', 'exch', 'add') for a in atoms):
            problems.append('atomics ' + ','.join(atoms))
        calls = sorted(set(re.findall(
            r'\bcall(?:\.uni)?\s*(?:\(\s*\w+\s*\)\s*,)?\s*(\w+)', code)))
        if calls:
            problems.append('calls ' + ','.join(calls))
        print('sm_%s %-6s%s %-42s atomics %-8s %s' % (
            arch, real, ' fmad' if fmad else '', kernel_name(name),
            ','.join(atoms) or '-',
            'NOT OK: ' + ', '.join(problems) if problems else 'OK'))
        bad += bool(problems)
print('check_ptx: %s' % ('NOT OK' if bad else 'OK'))
sys.exit(1 if bad else 0)
