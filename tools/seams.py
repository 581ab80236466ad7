#!/usr/bin/env python3
"""Check the seams between per.h and its companion files.

Usage: python3 tools/seams.py [ROOT]   (ROOT: the repository, default
the directory above this script). Exit status 0 when every check passes,
1 when one fails (each failure is printed as FILE:LINE: message, a
missing companion file as one), 2 when per.h or a part of it that the
checks read is missing. Python 3, standard library only.

What is checked:

1. Internal names. per.h's internal names start with peri_ / PERI_. A
   companion may use those that per.h shares with it:
   - every one that per.h's declarations define (the part before
     `#endif /* PER_H_INCLUDED */`: its >>internal section, the PER_HD
     helpers, PERI_NAME), since every file that includes per.h sees them;
   - and, for a companion that compiles per.h's implementation
     (per_cuda.cu, per_frames.h, per_traj.h, per_store.h, per_net.h,
     python/per/_per.c), those
     defined or declared in the implementation's >>pow section (x^y),
     >>rules section (what the kernels run too) and >>seam section (the
     checkpoint stages and byte sinks);
   plus its own private names: peri_cuda_ / PERI_CUDA_ in per_cuda.cu,
   peri_mpi_ / PERI_MPI_ in per_mpi.h, peri_frames_ / PERI_FRAMES_ in
   per_frames.h, peri_traj_ / PERI_TRAJ_ in per_traj.h, peri_store_ /
   PERI_STORE_ in per_store.h, peri_net_ / PERI_NET_ in per_net.h.
   per_mpi.h's
   implementation may be compiled without per.h's, so it may use
   neither section. Any other peri_ / PERI_
   identifier a companion uses is a violation. Comments and string
   literals are ignored.

   "Defined" is read from the code with comments removed: a `#define`
   (less those `#undef`ed again), a `typedef struct NAME` or `} NAME;`,
   an enum constant, and a line that starts at column 0 (per.h is
   clang-formatted, so declarations and definitions do and statements do
   not) with the name followed by `(`, `[`, `=` or `;`.

2. No field writes. per_mpi.h, per_frames.h, per_traj.h, per_store.h,
   per_net.h and python/per/_per.c change a per_buffer only through per.h's
   functions. The field names are parsed from per.h's `typedef struct per_buffer { ... } per_buffer;`. The variables
   that hold a per_buffer are the names declared with the type
   per_buffer in the file (`per_buffer *b`, `const per_buffer *b`,
   `per_buffer st`, a struct member `per_buffer shard`). A violation is
   VAR->FIELD or VAR.FIELD, FIELD a per_buffer field, followed by any
   chain of `.x`, `->x` or `[i]` and then an assignment operator (`=`,
   `+=`, `-=`, `*=`, `/=`, `%=`, `&=`, `|=`, `^=`, `<<=`, `>>=`) or `++`
   / `--`, or preceded by `++` / `--`. Not seen: writes through a pointer
   to a field (`memcpy(&b->rng, ...)`, `int *p = &b->size`), through a
   variable of another name or a cast; replacing the whole struct
   (`m->shard = st`) is not a field write.

3. Markers. In per.h and in the companion files listed in MARKED
   (per_frames.h, per_traj.h, per_store.h, per_net.h, per_cuda.cu,
   per_mpi.h), every
   `>>marker`
   that the file's comments use (section banners and cross references) is listed
   in the CONTENTS table of its top comment (lines of a /* */ or of //
   comments), and every marker the table lists occurs in the file outside
   it as a section banner: a line that starts with `/* >>name`, or a
   boxed title (below a line `/* ====...`) that ends with it. A marker
   written as another file's ("per.h's >>rules") is checked against that
   file's CONTENTS instead. A listed companion without a CONTENTS is a
   violation; per.h without one, exit status 2.

4. The design document. docs/DESIGN.md's table of sections (rows
   "| `FILE` | `>>a`, `>>b`, ... |") lists, for each file of rule 3, its
   CONTENTS markers in their order; a sentence's "`FILE`'s N sections"
   (N in words or digits) is that file's count; its table of kernels
   (rows "| `peri_cuda_..._kernel` | `>>section` | ... |") lists every
   `__global__` function of per_cuda.cu once, each in the section whose
   banner precedes it, and nothing else, and "`per_cuda.cu` defines N
   kernels" is their count; every `peri_cuda_..._kernel` named anywhere
   in docs/ is one of them.

The last line is a summary: seams: C companions, N shared names,
V violations (N counts the names of rule 1's first two kinds).
"""

import os
import re
import sys

# The companion files: the prefixes of their own names, and whether they
# compile per.h's implementation (then they may use >>rules) and may not
# write per_buffer fields.
COMPANIONS = [
    # path, private prefixes, compiles the implementation, field writes
    ("per_cuda.cu", ("peri_cuda_", "PERI_CUDA_"), True, True),
    ("per_mpi.h", ("peri_mpi_", "PERI_MPI_"), False, False),
    ("per_frames.h", ("peri_frames_", "PERI_FRAMES_"), True, False),
    ("per_traj.h", ("peri_traj_", "PERI_TRAJ_"), True, False),
    ("per_store.h", ("peri_store_", "PERI_STORE_"), True, False),
    ("per_net.h", ("peri_net_", "PERI_NET_"), True, False),
    ("python/per/_per.c", (), True, False),
]

# The companion files whose CONTENTS table rule 3 checks, as per.h's.
MARKED = ["per_frames.h", "per_traj.h", "per_store.h", "per_net.h",
          "per_cuda.cu", "per_mpi.h"]

# Rule 4's document, and the files whose sections it lists.
DESIGN = "docs/DESIGN.md"
NUMBERS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve "
    "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty "
    "twenty-one twenty-two twenty-three twenty-four twenty-five".split())}

DECL_END = "#endif /* PER_H_INCLUDED */"
IMPL_START = "#if defined(PER_IMPLEMENTATION) && !defined(PER_IMPLEMENTATION_INCLUDED)"
INTERNAL = re.compile(r"\b(peri_\w+|PERI_\w+)\b")
MARKER = re.compile(r">>([A-Za-z_]\w*)")
ASSIGN_OPS = r"(?:<<=|>>=|\+=|-=|\*=|/=|%=|&=|\|=|\^=|\+\+|--|=(?!=))"


class Missing(Exception):
    pass


def split(text):
    """(code, comments): text with its comments, or with everything but
    its comments, replaced by spaces; string and char literals blank in
    both; newlines kept, so positions and line numbers stay."""
    code, comments = [], []

    def keep(chunk, to_code):
        blank = re.sub(r"[^\n]", " ", chunk)
        code.append(chunk if to_code else blank)
        comments.append(blank if to_code else chunk)

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            keep(text[i:j], False)
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            keep(text[i:j], False)
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            keep(c, True)
            keep(re.sub(r"[^\n]", " ", text[i + 1:j - 1]), True)
            keep(text[j - 1:j] if j - 1 > i else "", True)
        else:
            j = i + 1
            while j < n and text[j] not in "/\"'":
                j += 1
            keep(text[i:j], True)
        i = j
    return "".join(code), "".join(comments)


def code_of(text):
    return split(text)[0]


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def defined_names(code):
    """peri_ / PERI_ names a region of code (comments removed) defines."""
    names = set()
    for m in re.finditer(r"^\s*#\s*define\s+(\w+)", code, re.M):
        names.add(m.group(1))
    for m in re.finditer(r"^\s*#\s*undef\s+(\w+)", code, re.M):
        names.discard(m.group(1))
    for m in re.finditer(r"\btypedef\s+(?:struct|union|enum)\s+(\w+)", code):
        names.add(m.group(1))
    for m in re.finditer(r"^\}\s*(\w+)\s*;", code, re.M):
        names.add(m.group(1))
    for m in re.finditer(r"\benum\b[^{;]*\{([^}]*)\}", code):
        for part in m.group(1).split(","):
            word = re.match(r"\s*(\w+)", part)
            if word:
                names.add(word.group(1))
    for m in re.finditer(r"^[A-Za-z_][^\n#]*?\b((?:peri|PERI)_\w+)\s*[(\[=;]", code,
                         re.M):
        names.add(m.group(1))
    return {x for x in names if INTERNAL.fullmatch(x)}


def section(text, start_pat, end_pats, what):
    """The part of text from the first match of start_pat to the first of
    end_pats after it (or the end)."""
    m = re.search(start_pat, text, re.M)
    if not m:
        raise Missing(f"per.h: no {what}")
    end = len(text)
    for pat in end_pats:
        e = re.compile(pat, re.M).search(text, m.end())
        if e:
            end = min(end, e.start())
    return m.start(), text[m.start():end]


def per_h_parts(per_h):
    decl_end = per_h.find(DECL_END)
    impl_start = per_h.find(IMPL_START)
    if decl_end < 0 or impl_start < 0:
        raise Missing("per.h: the declarations' end or the implementation's "
                      "start is not where this script looks")
    decl = per_h[:decl_end]
    impl = per_h[impl_start:]
    ends = [r"^/\* >>\w+\b"]
    _, pow_ = section(impl, r"^/\* >>pow\b", ends, "/* >>pow section")
    _, rules = section(impl, r"^/\* >>rules\b", ends, "/* >>rules section")
    _, seam = section(impl, r"^/\* >>seam\b", ends, "/* >>seam section")
    section(decl, r"={10,}\n[^\n]*>>internal\b", [],
            ">>internal section (a banner line after a line of =)")
    return decl, impl, pow_ + rules, seam


def buffer_fields(per_h_code):
    m = re.search(r"typedef struct per_buffer \{(.*?)\} per_buffer;", per_h_code, re.S)
    if not m:
        raise Missing("per.h: no `typedef struct per_buffer { ... } per_buffer;`")
    fields = set()
    for decl in m.group(1).split(";"):
        for part in decl.split(","):
            word = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", part.strip())
            if word:
                fields.add(word.group(1))
    return fields


def buffer_vars(code):
    return set(re.findall(r"\bper_buffer\b\s*(?:const\s*)?\**\s*(?:const\s+)?(\w+)",
                          code))


def field_writes(code, fields, variables):
    """(pos, text) of every write to a per_buffer field (rule 2)."""
    if not variables:
        return []
    var = "|".join(sorted(map(re.escape, variables)))
    fld = "|".join(sorted(map(re.escape, fields)))
    chain = r"(?:\s*(?:\.|->)\s*\w+|\s*\[[^\]\n]*\])*"
    post = re.compile(rf"\b(?:{var})\s*(?:->|\.)\s*(?:{fld})\b{chain}\s*{ASSIGN_OPS}")
    pre = re.compile(rf"(?:\+\+|--)\s*(?:\w+\s*(?:->|\.)\s*)*\b(?:{var})\s*"
                     rf"(?:->|\.)\s*(?:{fld})\b")
    hits = [(m.start(), m.group(0)) for m in post.finditer(code)]
    hits += [(m.start(), m.group(0)) for m in pre.finditer(code)]
    return sorted(hits)


CONTENTS = re.compile(r"^(?://)?[ \t]*CONTENTS\n(.*?)\n(?://)?[ \t]*\n",
                      re.S | re.M)
# A section's banner: `/* >>name` at a line's start, or a boxed title
# (a line of `/* ====` above it) that ends with >>name.
BANNER = r"^/\* >>(\w+)|^/\* ={10,}\n[^\n]*>>(\w+)[ \t]*$"
CROSS = re.compile(r"`?([\w.]+\.(?:h|cu))`?'s\s+`?>>(\w+)")


def contents_of(text):
    """(match, [markers in order]) of the CONTENTS table of text's top
    comment, or (None, [])."""
    m = CONTENTS.search(text)
    if not m:
        return None, []
    return m, re.findall(r">>(\w+)\s*$", m.group(1), re.M)


def marker_problems(rel, text, fatal, others=None):
    """Rule 3 for one file: (file, line, message) of each marker its
    comments use that its CONTENTS does not list (or, written as another
    file's, that file's CONTENTS in others: {file: [markers]}), and of
    each it lists with no banner. Without a CONTENTS: Missing when
    fatal, else one problem saying so."""
    problems = []
    m, order = contents_of(text)
    if not m:
        if fatal:
            raise Missing(f"{rel}: no CONTENTS table in the top comment")
        return [(rel, 1, "no CONTENTS table in the top comment")]
    listed = set(order)
    rest = split(text[:m.start()] + " " * (m.end() - m.start()) +
                 text[m.end():])[1]
    crossed = {}
    for mm in CROSS.finditer(rest):
        if mm.group(1) != rel and others and mm.group(1) in others:
            crossed[mm.start(2) - 2] = mm.group(1)
    used = {}
    for mm in MARKER.finditer(rest):
        owner = crossed.get(mm.start())
        if owner:
            if mm.group(1) not in others[owner]:
                problems.append((rel, line_of(text, mm.start()),
                                 f">>{mm.group(1)}: not a marker of "
                                 f"{owner}'s CONTENTS"))
            continue
        used.setdefault(mm.group(1), mm.start())
    for name, pos in sorted(used.items(), key=lambda kv: kv[1]):
        if name not in listed:
            problems.append((rel, line_of(text, pos),
                             f">>{name}: a marker that CONTENTS does not list"))
    for name in sorted(listed - set(used)):
        problems.append((rel, line_of(text, m.start()),
                         f">>{name}: listed in CONTENTS but found nowhere else"))
    banners = set(re.findall(BANNER, text, re.M))
    banners = {a or b for a, b in banners}
    for name in order:
        if name in used and name not in banners:
            problems.append((rel, line_of(text, used[name]),
                             f">>{name}: listed in CONTENTS but no line "
                             f"starts with `/* >>{name}`"))
    return problems


def kernels_of(text):
    """{name: the section whose banner precedes it} of every __global__
    function in text (per_cuda.cu)."""
    code = code_of(text)
    banners = [(m.start(), m.group(1))
               for m in re.finditer(r"^/\* >>(\w+)", text, re.M)]
    out = {}
    for m in re.finditer(r"__global__[^;{(]*?\b(peri_cuda_\w+)\s*\(", code):
        sec = None
        for pos, name in banners:
            if pos < m.start():
                sec = name
        out.setdefault(m.group(1), (sec, m.start()))
    return out


def number(word):
    return int(word) if word.isdigit() else NUMBERS.get(word.lower(), -1)


def design_problems(root, contents, kernels):
    """Rule 4: (file, line, message) of each place where DESIGN.md's
    tables and counts of sections and kernels differ from the files.
    contents: {file: [markers]}; kernels: per_cuda.cu's kernels_of."""
    problems = []
    path = os.path.join(root, DESIGN)
    if not os.path.exists(path):
        return [(DESIGN, 0, "missing")]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    seen = set()
    for m in re.finditer(r"^\| `([\w.]+)` \| (`>>[^|]*)\|\s*$", text, re.M):
        rel, got = m.group(1), re.findall(r"`>>(\w+)`", m.group(2))
        if rel not in contents:
            continue
        seen.add(rel)
        if got != contents[rel]:
            problems.append((DESIGN, line_of(text, m.start()),
                             f"{rel}'s sections are {contents[rel]} in its "
                             f"CONTENTS, not {got}"))
    for rel in sorted(set(contents) - seen):
        problems.append((DESIGN, 1, f"no row of the sections table for {rel}"))
    for m in re.finditer(r"`([\w.]+)`'s\s+([\w-]+)\s+sections", text):
        rel = m.group(1)
        if rel in contents and number(m.group(2)) != len(contents[rel]):
            problems.append((DESIGN, line_of(text, m.start()),
                             f"says {rel} has {m.group(2)} sections; its "
                             f"CONTENTS lists {len(contents[rel])}"))
    rows = {}
    for m in re.finditer(r"^\| `(peri_cuda_\w+_kernel)` \| `>>(\w+)` \|",
                         text, re.M):
        if m.group(1) in rows:
            problems.append((DESIGN, line_of(text, m.start()),
                             f"{m.group(1)}: listed twice"))
        rows[m.group(1)] = (m.group(2), m.start())
    for name, (sec, pos) in sorted(rows.items()):
        if name not in kernels:
            problems.append((DESIGN, line_of(text, pos),
                             f"{name}: no such kernel in per_cuda.cu"))
        elif kernels[name][0] != sec:
            problems.append((DESIGN, line_of(text, pos),
                             f"{name} is in per_cuda.cu's >>{kernels[name][0]}, "
                             f"not >>{sec}"))
    for name in sorted(set(kernels) - set(rows)):
        problems.append((DESIGN, 1, f"{name}: a kernel of per_cuda.cu that "
                         f"the kernels table does not list"))
    for m in re.finditer(r"`per_cuda\.cu` defines ([\w-]+) kernels", text):
        if number(m.group(1)) != len(kernels):
            problems.append((DESIGN, line_of(text, m.start()),
                             f"says per_cuda.cu defines {m.group(1)} kernels; "
                             f"it defines {len(kernels)}"))
    docs = os.path.join(root, "docs")
    for fn in sorted(os.listdir(docs)) if os.path.isdir(docs) else []:
        if not fn.endswith(".md"):
            continue
        with open(os.path.join(docs, fn), encoding="utf-8") as f:
            doc = f.read()
        for m in re.finditer(r"\bperi_cuda_\w+_kernel\b", doc):
            if m.group(0) not in kernels:
                problems.append(("docs/" + fn, line_of(doc, m.start()),
                                 f"{m.group(0)}: no such kernel in "
                                 f"per_cuda.cu"))
    return problems


def check(root):
    problems = []  # (file, line, message)
    per_h_path = os.path.join(root, "per.h")
    with open(per_h_path, encoding="utf-8") as f:
        per_h = f.read()
    decl, _, rules, seam = per_h_parts(per_h)
    decl_names = defined_names(code_of(decl))
    impl_names = defined_names(code_of(rules)) | defined_names(code_of(seam))
    fields = buffer_fields(code_of(per_h))

    checked = 0
    for rel, private, with_impl, may_write in COMPANIONS:
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            problems.append((rel, 0, "companion file missing"))
            continue
        checked += 1
        with open(path, encoding="utf-8") as f:
            text = f.read()
        code = code_of(text)
        allowed = decl_names | (impl_names if with_impl else set())
        first = {}
        for m in INTERNAL.finditer(code):
            name = m.group(1)
            if name in allowed or name.startswith(private):
                continue
            first.setdefault(name, m.start())
        for name, pos in sorted(first.items(), key=lambda kv: kv[1]):
            where = ("defined in its declarations or its >>pow, >>rules "
                     "or >>seam section"
                     if with_impl else "defined in its declarations: this "
                     "file may be compiled without per.h's implementation")
            own = " or ".join(p + "*" for p in private) or "none"
            problems.append((rel, line_of(code, pos),
                             f"{name}: not a name per.h shares with this file "
                             f"({where}), nor one of its own ({own})"))
        if not may_write:
            for pos, hit in field_writes(code, fields, buffer_vars(code)):
                hit = " ".join(hit.split())
                problems.append((rel, line_of(code, pos),
                                 f"writes a per_buffer field: `{hit}` (use "
                                 f"per.h's functions)"))

    # 3. markers
    texts = {"per.h": per_h}
    for rel in MARKED:
        path = os.path.join(root, rel)
        if os.path.exists(path):  # else rule 1 reports it missing
            with open(path, encoding="utf-8") as f:
                texts[rel] = f.read()
    contents = {rel: contents_of(t)[1] for rel, t in texts.items()}
    for rel, t in texts.items():
        problems += marker_problems(rel, t, fatal=rel == "per.h",
                                    others=contents)
    # 4. the design document
    kernels = kernels_of(texts.get("per_cuda.cu", ""))
    problems += design_problems(root, contents, kernels)
    return checked, len(decl_names | impl_names), problems


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    try:
        checked, shared, problems = check(root)
    except (Missing, OSError) as e:
        print(f"seams: {e}", file=sys.stderr)
        return 2
    for rel, line, msg in problems:
        print(f"{rel}:{line}: {msg}")
    print(f"seams: {checked} companions, {shared} shared names, "
          f"{len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
