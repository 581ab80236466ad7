#!/usr/bin/env python3
"""bench/peers_prep.py IN OUT: a torch-free copy of TorchRL 0.10.0's
torchrl/csrc/segment_tree.h for bench/bench_peers.cpp.

TorchRL's header mixes its segment trees with their Python bindings: it
includes pybind11 and torch, has py::array_t / torch::Tensor overloads
next to the plain C++ ones, and ends with the pybind11 registration
functions DefineSumSegmentTree and DefineMinSegmentTree. The benchmark
needs only the trees, compiled without torch. This script deletes, and
only deletes:
  - the pybind11, torch, numpy_utils.h and torch_utils.h includes;
  - the line `namespace py = pybind11;`;
  - every function whose signature mentions py:: or torch:: (the body
    found by brace matching), DefineSumSegmentTree and DefineMinSegmentTree
    among them;
and adds `#include <algorithm>` (MinOp's std::min came through torch)
and a comment saying where the file comes from. Everything else, the
algorithms included, is kept byte for byte; the script checks that by
comparing the lines kept with the original.

The version is pinned (torchrl 0.10.0, bench/peers.sh checks the wheel's
sha256), so the expected structure is exact: a missing include, an
unexpected or missing overload, or a py::/torch:: left anywhere stops the
script with status 1 and a message. Standard library only.
"""
import difflib
import re
import sys

DROP_LINES = [
    "#include <pybind11/numpy.h>",
    "#include <pybind11/pybind11.h>",
    "#include <torch/extension.h>",
    "#include <torch/torch.h>",
    '#include "numpy_utils.h"',
    '#include "torch_utils.h"',
    "namespace py = pybind11;",
]

# The functions with py::/torch:: in their signature, in file order.
EXPECTED_REMOVED = [
    "At", "At",                                  # py::array_t, torch::Tensor
    "Update", "Update", "Update", "Update",      # py x2, torch x2
    "Query", "Query",                            # py, torch
    "DumpValues", "LoadValues",                  # py::array_t
    "ScanLowerBound", "ScanLowerBound",          # py, torch
    "DefineSumSegmentTree", "DefineMinSegmentTree",
]

ANCHOR = "#include <cassert>"  # <algorithm> goes just before it
ADDED_INCLUDE = "#include <algorithm>"
BANNER = [
    "// bench/peers_prep.py: TorchRL 0.10.0 torchrl/csrc/segment_tree.h (MIT,",
    "// LICENSE beside this file) without its Python and torch glue: those",
    "// includes, overloads and registration functions deleted, nothing else",
    "// changed but this comment and <algorithm>. Fetched at bench time by",
    "// bench/peers.sh; not part of the per repository.",
]


def die(msg):
    sys.stderr.write(f"peers_prep.py: {msg}\n")
    sys.exit(1)


def skip_noncode(s, i):
    """If s[i] starts a comment, string or char literal, the index after it;
    else i."""
    if s.startswith("//", i):
        j = s.find("\n", i)
        return len(s) if j < 0 else j
    if s.startswith("/*", i):
        j = s.find("*/", i + 2)
        if j < 0:
            die("unterminated /* comment")
        return j + 2
    if s[i] in "\"'":
        q, j = s[i], i + 1
        while j < len(s) and s[j] != q:
            j += 2 if s[j] == "\\" else 1
        if j >= len(s):
            die("unterminated literal")
        return j + 1
    return i


def match_brace(s, i):
    """Index just after the } that closes the { at s[i]."""
    depth = 0
    while i < len(s):
        j = skip_noncode(s, i)
        if j != i:
            i = j
            continue
        if s[i] == "{":
            depth += 1
        elif s[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    die("unbalanced braces")


def signature_start(s, a, b):
    """Start of the line where the declaration in s[a:b] begins: past blank
    lines, comment lines and access labels."""
    pos = a
    for line in s[a:b].splitlines(keepends=True):
        t = line.strip()
        if t and not t.startswith("//") and t not in (
                "public:", "protected:", "private:"):
            break
        pos += len(line)
    return s.rfind("\n", 0, pos) + 1


def scan(s, a, b, cuts, names):
    """Collect in cuts the (start, end) ranges of the functions in s[a:b]
    (a namespace or class body) whose signature mentions py:: or torch::,
    descending into nested namespaces and classes."""
    chunk = a
    i = a
    while i < b:
        j = skip_noncode(s, i)
        if j != i:
            i = j
            continue
        c = s[i]
        if c == ";":
            chunk = i + 1
        elif c == "{":
            end = match_brace(s, i)
            sig = s[chunk:i]
            code = re.sub(r"//[^\n]*", "", sig)
            if re.search(r"\b(class|struct|namespace)\b", code) and "(" not in code:
                scan(s, i + 1, end - 1, cuts, names)
            elif "py::" in code or "torch::" in code:
                m = re.search(r"([A-Za-z_]\w*)\s*\(", code)
                if not m:
                    die(f"no function name in: {code.strip()[:80]}")
                start = signature_start(s, chunk, i)
                stop = end
                if s.startswith("\n", stop):
                    stop += 1
                # A blank line left between two kept functions stays; the
                # one the deleted function owned before it goes with it.
                if s.startswith("\n", start - 2) and s[start - 1] == "\n":
                    start -= 1
                cuts.append((start, stop))
                names.append(m.group(1))
            i = end
            chunk = i
            continue
        i += 1


def main():
    if len(sys.argv) != 3:
        die("usage: peers_prep.py IN OUT")
    src = open(sys.argv[1], encoding="utf-8").read()
    lines = src.splitlines(keepends=True)
    for d in DROP_LINES:
        hits = [k for k, ln in enumerate(lines) if ln.rstrip("\n") == d]
        if len(hits) != 1:
            die(f"expected one line {d!r}, found {len(hits)}")
        lines[hits[0]] = ""
    text = "".join(lines)
    if text.count(ANCHOR + "\n") != 1:
        die(f"expected one line {ANCHOR!r}")
    if ADDED_INCLUDE in text:
        die(f"{ADDED_INCLUDE} already there: not the pinned version")

    cuts, names = [], []
    scan(text, 0, len(text), cuts, names)
    if names != EXPECTED_REMOVED:
        die(f"unexpected py::/torch:: functions: {names}, expected "
            f"{EXPECTED_REMOVED}")
    out, last = [], 0
    for a, b in cuts:
        out.append(text[last:a])
        last = b
    out.append(text[last:])
    text = "".join(out)
    text = text.replace(ANCHOR + "\n", ADDED_INCLUDE + "\n" + ANCHOR + "\n")
    # The dropped include lines leave runs of blank lines: one is enough.
    text = re.sub(r"\n{3,}", "\n\n", text)
    text = "\n".join(BANNER) + "\n\n" + text

    for bad in ("py::", "torch::", "pybind11", "utils::", "Tensor"):
        if bad in text:
            die(f"{bad} still in the output")
    for need in ("class SumSegmentTree", "class MinSegmentTree",
                 "int64_t ScanLowerBound(const T& value) const",
                 "void Update(int64_t index, const T& value)",
                 "T Query(int64_t l, int64_t r) const"):
        if need not in text:
            die(f"{need!r} missing from the output")

    # Only deletions, apart from the banner and the include.
    added = set(BANNER + ["", ADDED_INCLUDE])
    a_lines = src.splitlines()
    b_lines = text.splitlines()
    sm = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op in ("insert", "replace"):
            extra = [ln for ln in b_lines[j1:j2] if ln not in added]
            if extra:
                die(f"output has lines not in the original: {extra[:3]}")
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(text)
    print(f"peers_prep.py: {sys.argv[2]}: {len(names)} functions with "
          f"py::/torch:: and {len(DROP_LINES)} lines removed, "
          f"{len(a_lines)} -> {len(b_lines)} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
