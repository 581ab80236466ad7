#!/usr/bin/env python3
"""tools/format_comments.py [--check] FILE...: the one rule of the house
style clang-format leaves alone.

A block comment that trails code and runs over several lines keeps its
later lines under the text of its first line:

    uint32_t *gen;  /* per slot: times written (0 = never), counted
                       1..2^32-1 then 1 again */

clang-format (ReflowComments: false) moves the first line when it aligns
trailing comments but not the lines below it. Without --check, re-indent
those lines in place; with --check, change nothing, print each line that
is off and exit 1 when there is one.
"""
import re
import sys

OPEN = re.compile(r'/\*')


def fix_lines(lines):
    """(fixed lines, [(line number, wanted column, found column)])."""
    out, off = list(lines), []
    i = 0
    while i < len(out):
        line = out[i]
        m = OPEN.search(line)
        code = line[:m.start()].strip() if m else ''
        if (m and code and not code.startswith('//')
                and '*/' not in line[m.start():]
                and code.count('"') % 2 == 0):
            col = m.start() + 3  # the text after "/* "
            j = i + 1
            while j < len(out):
                s = out[j]
                ind = len(s) - len(s.lstrip(' '))
                if s.strip() and ind != col:
                    off.append((j + 1, col, ind))
                    out[j] = ' ' * col + s.lstrip(' ')
                if '*/' in s:
                    break
                j += 1
            i = j
        i += 1
    return out, off


def main(argv):
    check = '--check' in argv
    files = [a for a in argv if a != '--check']
    bad = 0
    for name in files:
        with open(name, encoding='utf-8') as f:
            lines = f.read().split('\n')
        fixed, off = fix_lines(lines)
        for n, want, got in off:
            if check:
                print(f'{name}:{n}: trailing comment continues at column '
                      f'{got + 1}, its text starts at column {want + 1}')
        bad += len(off)
        if off and not check:
            with open(name, 'w', encoding='utf-8') as f:
                f.write('\n'.join(fixed))
    return 1 if check and bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
