#!/usr/bin/env python3
"""Check docs/FORMAT.md's header table against per.h's PERI_CKPT_FIELDS.

tools/format_table.py SRCDIR

The checkpoint header is one X-macro list in per.h (PERI_CKPT_FIELDS: a
row per field, each after the ones above it, u32 = 4 bytes, u64 and f64 =
8). The table in docs/FORMAT.md may group fields (the rng's four words
are one row), so it must tile the header: its rows start at 0, each
starts where the one before it ends and at the start of a field, and the
last ends where the header does. Prints what differs and exits 1, or
prints "format table: N rows match M fields (H bytes)" and exits 0.
"""
import os
import re
import sys

WIDTH = {'u32': 4, 'u64': 8, 'f64': 8}


def fields(per_h):
    """[(offset, width, NAME, since)] of PERI_CKPT_FIELDS, and its size."""
    lines, inside = [], False
    for line in open(per_h, encoding='utf-8'):
        if line.startswith('#define PERI_CKPT_FIELDS(X)'):
            inside = True
        if inside:
            lines.append(line)
            if not line.rstrip().endswith('\\'):
                break
    rows = re.findall(r'X\((\w+),\s*\w+,\s*(u32|u64|f64),\s*(\d+)',
                      ''.join(lines))
    out, off = [], 0
    for name, typ, since in rows:
        out.append((off, WIDTH[typ], name, int(since)))
        off += WIDTH[typ]
    return out, off


def table(format_md):
    """The rows of the file's first offset table (the checkpoint header;
    the MPI manifest's table comes later)."""
    rows = []
    for line in open(format_md, encoding='utf-8'):
        m = re.match(r'^\|\s*(\d+)\s*\|\s*(\d+)\s*\|', line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), line.strip()))
        elif rows and not line.startswith('|'):
            break
    return rows


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else '.'
    flds, hbytes = fields(os.path.join(src, 'per.h'))
    rows = table(os.path.join(src, 'docs', 'FORMAT.md'))
    starts = {f[0]: f for f in flds}
    bad = []
    if not flds:
        bad.append('no fields in PERI_CKPT_FIELDS')
    if not rows:
        bad.append('no header table in docs/FORMAT.md')
    at = 0
    for off, size, line in rows:
        if off != at:
            bad.append('row at %d, expected %d: %s' % (off, at, line))
        if off not in starts:
            bad.append('row at %d starts inside a field: %s' % (off, line))
        elif starts[off][3] > 1 and 'version %d' % starts[off][3] not in line:
            bad.append('row at %d (%s) does not say "version %d"'
                       % (off, starts[off][2], starts[off][3]))
        at = off + size
    if at != hbytes:
        bad.append('the table ends at %d, the header at %d' % (at, hbytes))
    if bad:
        for b in bad:
            print('format table: ' + b)
        return 1
    print('format table: %d rows match %d fields (%d bytes)'
          % (len(rows), len(flds), hbytes))
    return 0


if __name__ == '__main__':
    sys.exit(main())
