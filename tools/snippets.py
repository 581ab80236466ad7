#!/usr/bin/env python3
"""Compile every C code block of the documentation, so the docs cannot rot.

tools/snippets.py SRCDIR OUTDIR --cc "CC..." --cxx "CXX..." [--nvcc NVCC]

Blocks: every ```c and ```cuda block of the Markdown documentation
(README.md, every docs/*.md, examples/README.md), and the QUICK START
blocks of the manuals of per.h, per_traj.h, per_store.h and per_net.h (the
indented lines under
a heading of the top comment that contains "QUICK START"). Each block is named by its file and the line
its code starts on (docs/GUIDE.md:120). Each C block is compiled as C99
and as C++11 with -Wall -Wextra -Wpedantic -Werror:

- a block with `int main(` is a whole program: compiled as it is, then
  linked with -lm -pthread and run (it must exit 0);
- a block that includes per.h itself is a file: compiled as it is, with
  an empty main appended;
- a block with a function definition at column 0 is file-scope code:
  compiled after a prelude (_POSIX_C_SOURCE 200809L, stdio.h, math.h,
  per.h, per_traj.h, per_store.h, per_net.h) with an empty main;
- anything else is a fragment of a function: compiled inside
  int main(void) { ... return 0; } after the same prelude.

A ```cuda block is compiled with nvcc -c (whole file, as it is) when nvcc
is given. Prints one line per block, then the count per file, and exits 1
if any failed.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

PRELUDE = ('#define _POSIX_C_SOURCE 200809L\n'
           '#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n'
           '#include "per.h"\n#include "per_traj.h"\n#include "per_store.h"\n'
           '#include "per_net.h"\n')


def doc_files(src):
    """The Markdown files whose blocks are compiled, relative to src."""
    names = ['README.md']
    docs = os.path.join(src, 'docs')
    if os.path.isdir(docs):
        names += ['docs/' + n for n in sorted(os.listdir(docs)) if n.endswith('.md')]
    names.append('examples/README.md')
    return [n for n in names if os.path.isfile(os.path.join(src, n))]


def markdown_blocks(src, name):
    """The ```c and ```cuda blocks of src/name, each named name:line."""
    path = os.path.join(src, name)
    blocks, lang, start, buf = [], None, 0, []
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            if lang is None:
                m = re.match(r'^```(\w*)\s*$', line)
                if m:
                    lang, start, buf = m.group(1), n + 1, []
            elif line.startswith('```'):
                if lang in ('c', 'cuda'):
                    blocks.append((lang, '%s:%d' % (name, start), ''.join(buf)))
                lang = None
            else:
                buf.append(line)
    return blocks


def manual_blocks(path):
    """The QUICK START blocks of the top comment of a header (per.h)."""
    name = os.path.basename(path)
    with open(path, encoding='utf-8') as f:
        text = f.read()
    top = text[:text.index('*/')].split('\n')
    blocks, cur, start = [], None, 0
    for n, line in enumerate(top, 1):
        if re.match(r'^   [A-Z]', line):  # a heading of the manual
            if cur:
                blocks.append(('c', '%s:%d' % (name, start), '\n'.join(cur) + '\n'))
            cur = [] if 'QUICK START' in line else None
            start = n + 1
        elif cur is not None and line.strip():
            cur.append(line[6:] if line.startswith('      ') else line.strip())
    if cur:
        blocks.append(('c', '%s:%d' % (name, start), '\n'.join(cur) + '\n'))
    return blocks


def wrap(code):
    """(source, kind) for a C block."""
    if re.search(r'\bint main\s*\(', code):
        return code, 'program'
    if re.search(r'#\s*include\s*"per\.h"', code):
        return code + '\nint main(void) { return 0; }\n', 'file'
    if re.search(r'^(?!(if|for|while|switch|do|else)\b)[A-Za-z_][\w\s\*]*\([^;]*\)\s*\{\s*$',
                 code, re.M):
        return PRELUDE + code + '\nint main(void) { return 0; }\n', 'file scope'
    return PRELUDE + 'int main(void) {\n' + code + '\n  return 0;\n}\n', 'fragment'


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=300)
    return p.returncode, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('src')
    ap.add_argument('out')
    ap.add_argument('--cc', required=True)
    ap.add_argument('--cxx', required=True)
    ap.add_argument('--nvcc')
    a = ap.parse_args()
    a.src, a.out = os.path.abspath(a.src), os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    cc, cxx = shlex.split(a.cc), shlex.split(a.cxx)
    warn = ['-Wall', '-Wextra', '-Wpedantic', '-Werror', '-I' + a.src]
    blocks = []
    for name in doc_files(a.src):
        blocks += markdown_blocks(a.src, name)
    for header in ('per.h', 'per_traj.h', 'per_store.h', 'per_net.h'):
        blocks += manual_blocks(os.path.join(a.src, header))
    width = max([len(where) for _, where, _ in blocks] + [16])
    failed = 0
    for i, (lang, where, code) in enumerate(blocks):
        base = os.path.join(a.out, 'snippet%02d' % i)
        if lang == 'cuda':
            if not a.nvcc:
                print('%-*s cuda: no nvcc, not compiled' % (width, where))
                continue
            with open(base + '.cu', 'w') as f:
                f.write(code)
            rc, log = run([a.nvcc, '-c', '-Werror', 'all-warnings', '-I' + a.src,
                           base + '.cu', '-o', base + '_cu.o'], a.out)
            ok = rc == 0
            print('%-*s cuda: %s' % (width, where, 'ok' if ok else 'FAILED'))
            if not ok:
                failed += 1
                sys.stdout.write(log)
            continue
        src, kind = wrap(code)
        with open(base + '.c', 'w') as f:
            f.write(src)
        results = []
        for name, cmd in (('C99', cc + ['-std=c99', '-x', 'c']),
                          ('C++11', cxx + ['-std=c++11', '-x', 'c++'])):
            obj = base + ('_c.o' if name == 'C99' else '_cpp.o')
            rc, log = run(cmd + warn + ['-c', base + '.c', '-o', obj], a.out)
            if rc == 0 and kind == 'program':
                exe = base + ('_c' if name == 'C99' else '_cpp')
                link = (cc if name == 'C99' else cxx) + [obj, '-o', exe, '-lm',
                                                         '-pthread']
                rc, log = run(link, a.out)
                if rc == 0:
                    rc, log = run([exe], a.out)
                    log = '%s exited %d\n%s' % (exe, rc, log)
            results.append((name, rc, log))
        ok = all(rc == 0 for _, rc, _ in results)
        print('%-*s %-10s %s' % (width, where, kind, ', '.join(
            '%s %s' % (name, 'ok' if rc == 0 else 'FAILED') for name, rc, _ in results)))
        if not ok:
            failed += 1
            for name, rc, log in results:
                if rc != 0:
                    sys.stdout.write('--- %s (%s):\n%s' % (name, base + '.c', log))
    per_file = {}
    for _, where, _ in blocks:
        name = where.rsplit(':', 1)[0]
        per_file[name] = per_file.get(name, 0) + 1
    print('blocks per file: ' + ', '.join('%s %d' % kv for kv in per_file.items()))
    print('snippets: %d blocks, %d failed' % (len(blocks), failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
