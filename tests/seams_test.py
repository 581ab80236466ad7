#!/usr/bin/env python3
"""tools/seams.py catches what it says it catches.

Usage: python3 tests/seams_test.py ROOT (the repository). Copies the files
seams.py reads into a temporary directory, checks that the copy passes
(exit 0), then makes one change at a time and checks that seams.py fails
with the message that names it:

- per_frames.h calls a >>ckpt function outside the >>seam section;
- per_mpi.h (compiled without per.h's implementation) calls a >>seam
  function;
- per_frames.h writes a per_buffer field;
- per_frames.h's CONTENTS forgets one of its markers, or is not there;
- per.h's CONTENTS lists a marker that is nowhere else;
- per.h loses its >>seam section (exit 2: nothing to check against).

Prints one line per case and `seams_test: N passed, N failed`; exit 1
when a case failed.
"""
import os
import shutil
import subprocess
import sys
import tempfile

FILES = ["per.h", "per_frames.h", "per_mpi.h", "per_cuda.cu",
         "python/per/_per.c", "tools/seams.py"]


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
     "  peri_ckpt_emit(&f->buffer, &o);\n  (void)peri_ckpt_header;\n",
     1, "peri_ckpt_header: not a name per.h shares"),
    ("per_mpi.h calls a >>seam function", "per_mpi.h",
     "#ifdef PER_MPI_IMPLEMENTATION\n",
     "#ifdef PER_MPI_IMPLEMENTATION\nstatic void (*peri_mpi_x)(uint32_t *) = "
     "peri_crc_table;\n",
     1, "peri_crc_table: not a name per.h shares"),
    ("a companion writes a per_buffer field", "per_frames.h",
     "  peri_ckpt_emit(&f->buffer, &o);\n",
     "  peri_ckpt_emit(&f->buffer, &o);\n  f->buffer.size = 0;\n",
     1, "writes a per_buffer field"),
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
