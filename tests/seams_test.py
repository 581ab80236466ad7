#!/usr/bin/env python3
"""tools/seams.py catches what it says it catches.

Usage: python3 tests/seams_test.py ROOT (the repository). Copies the files
seams.py reads into a temporary directory, checks that the copy passes
(exit 0), then makes one change at a time and checks that seams.py fails
with the message that names it:

- per_frames.h calls a >>ckpt function outside the >>seam section;
- per_mpi.h (compiled without per.h's implementation) calls a >>seam
  function;
- per_frames.h writes a per_buffer field; per_net.h writes one of a
  table's buffer, or uses another companion's private name;
- per_frames.h's CONTENTS forgets one of its markers, or is not there;
- per.h's CONTENTS lists a marker that is nowhere else;
- per.h loses its >>seam section (exit 2: nothing to check against);
- per_cuda.cu's CONTENTS (// comments) forgets a marker; a section of
  per_mpi.h loses its banner; per_mpi.h names a marker of per.h's that
  per.h does not have;
- docs/DESIGN.md's table of sections lists per.h's in another order, or
  a count of sections that is wrong; its kernels table lists a kernel
  that is gone, misses one, or puts one in another section; a count of
  kernels that is wrong.

Prints one line per case and `seams_test: N passed, N failed`; exit 1
when a case failed.
"""
import os
import shutil
import subprocess
import sys
import tempfile

FILES = ["per.h", "per_frames.h", "per_traj.h", "per_store.h", "per_net.h", "per_mpi.h",
         "per_cuda.cu", "python/per/_per.c", "tools/seams.py", "docs/DESIGN.md"]


def run(root):
    p = subprocess.run([sys.executable, os.path.join(root, "tools", "seams.py"), root],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def edit(root, rel, old, new):
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if old not in text:
        raise AssertionError(f"{rel}: the text to change is gone: {old!r}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))


# (name, file, old text, new text, exit status, a line of the output)
CASES = [
    ("a companion calls a >>ckpt private", "per_frames.h",
     "  peri_ckpt_emit(&f->buffer, &o);\n",
     "  peri_ckpt_emit(&f->buffer, &o);\n  (void)peri_hdr_read;\n",
     1, "peri_hdr_read: not a name per.h shares"),
    ("per_mpi.h calls a >>seam function", "per_mpi.h",
     "#ifdef PER_MPI_IMPLEMENTATION\n",
     "#ifdef PER_MPI_IMPLEMENTATION\nstatic void (*peri_mpi_x)(uint32_t *) = "
     "peri_crc_table;\n",
     1, "peri_crc_table: not a name per.h shares"),
    ("a companion writes a per_buffer field", "per_frames.h",
     "  peri_ckpt_emit(&f->buffer, &o);\n",
     "  peri_ckpt_emit(&f->buffer, &o);\n  f->buffer.size = 0;\n",
     1, "writes a per_buffer field"),
    ("per_net.h writes a table's per_buffer field", "per_net.h",
     "  t->inserts++;\n", "  t->inserts++;\n  t->buf.size = 0;\n",
     1, "writes a per_buffer field: `buf.size =`"),
    ("per_net.h uses per_traj.h's private name", "per_net.h",
     "  t->inserts++;\n", "  t->inserts++;\n  (void)peri_traj_name_ok;\n",
     1, "peri_traj_name_ok: not a name per.h shares"),
    ("DESIGN.md counts per_net.h's sections wrong", "docs/DESIGN.md",
     "`per_net.h`'s four sections", "`per_net.h`'s three sections",
     1, "says per_net.h has three sections"),
    ("a companion's CONTENTS forgets a marker", "per_frames.h",
     "   Implementation: checkpoints (not with PER_NO_STDIO) .......   >>ckpt\n",
     "", 1, ">>ckpt: a marker that CONTENTS does not list"),
    ("a companion without a CONTENTS", "per_frames.h",
     "   CONTENTS\n", "   TABLE\n", 1,
     "per_frames.h:1: no CONTENTS table in the top comment"),
    ("per.h's CONTENTS lists a marker found nowhere", "per.h",
     "      (grep for the >>markers)\n",
     "         nowhere ........................................   >>nowhere\n"
     "      (grep for the >>markers)\n",
     1, ">>nowhere: listed in CONTENTS but found nowhere else"),
    ("per.h without its >>seam section", "per.h",
     "/* >>seam: ", "/* the seam: ", 2, "no /* >>seam section"),
    ("per_cuda.cu's CONTENTS forgets a marker", "per_cuda.cu",
     "//    The API: per_cuda.h's functions ......................"
     ".......... >>api\n", "",
     1, ">>api: a marker that CONTENTS does not list"),
    ("a section of per_mpi.h loses its banner", "per_mpi.h",
     "/* >>init */", "/* init (>>init) */",
     1, ">>init: listed in CONTENTS but no line starts with `/* >>init`"),
    ("per_mpi.h names a marker per.h does not have", "per_mpi.h",
     "per.h's >>internal", "per.h's >>internals",
     1, ">>internals: not a marker of per.h's CONTENTS"),
    ("DESIGN.md lists per.h's sections in another order", "docs/DESIGN.md",
     "`>>status`, `>>rng`, `>>tree`", "`>>rng`, `>>status`, `>>tree`",
     1, "per.h's sections are"),
    ("DESIGN.md counts per_mpi.h's sections wrong", "docs/DESIGN.md",
     "`per_mpi.h`'s eight sections", "`per_mpi.h`'s nine sections",
     1, "says per_mpi.h has nine sections"),
    ("DESIGN.md names a kernel that is gone", "docs/DESIGN.md",
     "| `peri_cuda_find_kernel` |", "| `peri_cuda_gone_kernel` |",
     1, "peri_cuda_gone_kernel: no such kernel in per_cuda.cu"),
    ("DESIGN.md's kernels table misses one", "docs/DESIGN.md",
     "| `peri_cuda_find_kernel` |", "| find |",
     1, "peri_cuda_find_kernel: a kernel of per_cuda.cu that the kernels"),
    ("DESIGN.md puts a kernel in another section", "docs/DESIGN.md",
     "| `peri_cuda_draw_kernel` | `>>draw` |",
     "| `peri_cuda_draw_kernel` | `>>buffer` |",
     1, "peri_cuda_draw_kernel is in per_cuda.cu's >>draw, not >>buffer"),
    ("DESIGN.md counts the kernels wrong", "docs/DESIGN.md",
     "defines eighteen kernels", "defines seventeen kernels",
     1, "says per_cuda.cu defines seventeen kernels; it defines 18"),
]


def main(argv):
    src = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        def fresh():
            for rel in FILES:
                os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
                shutil.copy(os.path.join(src, rel), os.path.join(tmp, rel))

        fresh()
        rc, out = run(tmp)
        ok = rc == 0 and " 0 violations" in out
        print(f"{'ok' if ok else 'FAIL'}: the tree as it is passes (exit {rc})")
        if not ok:
            print(out)
        passed, failed = passed + ok, failed + (not ok)
        for name, rel, old, new, want_rc, want in CASES:
            fresh()
            edit(tmp, rel, old, new)
            rc, out = run(tmp)
            ok = rc == want_rc and want in out
            print(f"{'ok' if ok else 'FAIL'}: {name} (exit {rc}, want {want_rc}: {want!r})")
            if not ok:
                print(out)
            passed, failed = passed + ok, failed + (not ok)
    print(f"seams_test: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
