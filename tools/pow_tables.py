#!/usr/bin/env python3
"""Write or check the tables and constants of per.h's peri_pow.

Usage: python3 tools/pow_tables.py [--write | --check] [PER_H]
  (no option)  print the blocks
  --write      replace the blocks in per.h (then run tools/format.sh)
  --check      exit 1 when per.h's blocks hold other numbers than these

Two blocks of per.h's >>pow section: the constants, between the lines
`/* pow constants: written by` and `/* end of the pow constants */`
(above the functions that use them), and the tables' rows, between
`/* pow tables: written by` and `/* end of the pow tables */` (last in
the section). --check compares numbers, not text, so the blocks may be
formatted as clang-format likes. Python 3, standard library only: the
values are computed with decimal at 80 digits and rounded to double once
(Python's float() of a Decimal is correctly rounded), and every literal
is printed with repr(), which reads back as the same double.

What the numbers are (per.h, peri_pow, says how they are used):

- PERI_POW_OFF: the bits of about sqrt(1/2), aligned so that 1.0 lies
  in the middle of a table interval. x = 2^e m with m in [v(OFF),
  2 v(OFF)); the 7 bits below the exponent of (bits(x) - OFF) pick one of
  128 intervals of m.
- peri_pow_ln rows {c, hi, lo}: c about 1 / (the interval's middle),
  rounded to 10 significant bits (1 exactly for the interval holding
  1.0), so that m_hi c is exact for m's top 43 bits; hi + lo = -ln(c) to
  about 2^-106. Checked: |ln c| > |r| + r^2 / 2 for every r of a row with
  c != 1 (peri_pow adds with Fast2Sum, which needs the larger term
  first).
- peri_pow_exp rows {hi, lo}: hi + lo = 2^(j / 128).
- ln 2 as LN2_HI (42 bits: e LN2_HI is exact for |e| < 2^11) + LN2_LO;
  ln 2 / 128 as EXP_C_HI (34 bits: k EXP_C_HI is exact for |k| < 2^19) +
  EXP_C_LO, and 128 / ln 2.
- the Taylor coefficients of ln(1 + r) (r^3 .. r^9: (-1)^(k+1) / k) and
  of e^z (1 / k!, up to z^6).
"""

import math
import re
import sys
from decimal import Decimal as D
from decimal import getcontext

getcontext().prec = 80

N = 128
OFF = 0x3FE6B00000000000


def bits_to_double(b):
    import struct

    return struct.unpack("<d", struct.pack("<Q", b))[0]


def round_sig(x, nb):
    """The positive Decimal x rounded to nb significant bits, a float."""
    m, e = math.frexp(float(x))
    q = int((x * (D(2) ** (nb - e))).to_integral_value())
    return q * 2.0 ** (e - nb)


def split(x):
    hi = float(x)
    return hi, float(x - D(hi))


def values():
    """Every number of the block, in order, as (name, [floats])."""
    ln2 = D(2).ln()
    out = []
    ln_rows = []
    for i in range(N):
        lo = bits_to_double(OFF + i * (1 << 45))
        hi = bits_to_double(OFF + (i + 1) * (1 << 45))
        c = 1.0 if lo <= 1.0 < hi else round_sig(D(2) / (D(lo) + D(hi)), 10)
        h, l = split(-D(c).ln())
        # peri_pow's sums use Fast2Sum: |ln c| must exceed |r| + r^2 / 2
        r = max(abs(D(lo) * D(c) - 1), abs(D(hi) * D(c) - 1))
        if c != 1.0 and not abs(D(c).ln()) > r + r * r / 2:
            raise SystemExit("pow_tables: row %d: |ln c| <= |r| + r^2/2" % i)
        ln_rows += [c, h, l]
    out.append(("peri_pow_ln", ln_rows))
    exp_rows = []
    for j in range(N):
        h, l = split((D(j) / N * ln2).exp())
        exp_rows += [h, l]
    out.append(("peri_pow_exp", exp_rows))
    ln2_hi = round_sig(ln2, 42)
    c_hi = round_sig(ln2 / N, 34)
    out.append(("PERI_POW_LN2_HI", [ln2_hi]))
    out.append(("PERI_POW_LN2_LO", [float(ln2 - D(ln2_hi))]))
    out.append(("PERI_POW_EXP_C_HI", [c_hi]))
    out.append(("PERI_POW_EXP_C_LO", [float(ln2 / N - D(c_hi))]))
    out.append(("PERI_POW_EXP_INV_C", [float(N / ln2)]))
    for k in range(3, 10):
        out.append(("PERI_POW_LN%d" % k, [float(D((-1) ** (k + 1)) / k)]))
    f = D(1)
    for k in range(1, 7):
        f *= k
        out.append(("PERI_POW_EXP%d" % k, [float(1 / f)]))
    return out


def blocks():
    """The two blocks: the constants (above the functions that use them)
    and the tables' rows (last in per.h's >>pow section)."""
    consts = [
        "/* pow constants: written by tools/pow_tables.py (which says what",
        "   they are), checked in CI; do not edit by hand. */",
        "#define PERI_POW_OFF 0x%XULL" % OFF,
    ]
    rows = [
        "/* pow tables: written by tools/pow_tables.py (which says what they",
        "   are), checked in CI; do not edit by hand. */",
    ]
    for name, vals in values():
        if name == "peri_pow_ln":
            rows.append("#define PERI_POW_LN_ROWS \\")
            for i in range(0, len(vals), 3):
                end = ", \\" if i + 3 < len(vals) else ""
                rows.append("  {%r, %r, %r}%s" % (vals[i], vals[i + 1],
                                                  vals[i + 2], end))
        elif name == "peri_pow_exp":
            rows.append("#define PERI_POW_EXP_ROWS \\")
            for i in range(0, len(vals), 2):
                end = ", \\" if i + 2 < len(vals) else ""
                rows.append("  {%r, %r}%s" % (vals[i], vals[i + 1], end))
        else:
            consts.append("#define %s %r" % (name, vals[0]))
    consts.append("/* end of the pow constants */")
    rows.append("/* end of the pow tables */")
    return {"constants": "\n".join(consts) + "\n",
            "tables": "\n".join(rows) + "\n"}


NUM = re.compile(r"(?<![\w.])-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+)")


def numbers(text):
    return [float(t) for t in NUM.findall(text)]


def find(text, what):
    """(start, end) of the block `what` ("constants" or "tables") in
    text, or None."""
    head, tail = "/* pow %s: written by" % what, "/* end of the pow %s */" % what
    a = text.find(head)
    b = text.find(tail, a)
    if a < 0 or b < 0:
        return None
    return a, b + len(tail) + 1


def main(argv):
    mode = argv[1] if len(argv) > 1 and argv[1].startswith("--") else ""
    path = argv[-1] if len(argv) > 1 and not argv[-1].startswith("--") \
        else "per.h"
    want = blocks()
    if not mode:
        sys.stdout.write(want["constants"] + "\n" + want["tables"])
        return 0
    with open(path, encoding="utf-8") as f:
        text = f.read()
    count = 0
    for what in ("constants", "tables"):
        span = find(text, what)
        if span is None:
            print("pow_tables: no pow %s block in %s" % (what, path))
            return 2
        if mode == "--write":
            text = text[:span[0]] + want[what] + text[span[1]:]
            continue
        got = numbers(text[span[0]:span[1]])
        if got != numbers(want[what]) or (
                what == "constants" and
                "0x%XULL" % OFF not in text[span[0]:span[1]]):
            print("pow_tables: %s's %s block differs from "
                  "tools/pow_tables.py (run python3 tools/pow_tables.py "
                  "--write %s)" % (path, what, path))
            return 1
        count += len(got)
    if mode == "--write":
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return 0
    print("pow_tables: %d numbers match" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
