"""The documentation's Python examples run as they are, so it cannot rot:
every ```python block of the README's two Python quick starts ("## Quick
start: Python", "## Quick start: PyTorch on the GPU") and of
docs/PYTHON.md, which holds the PyTorch loop. (docs/MPI.md's per.mpi
block needs mpirun: python/tests_mpi/check_mpi.py runs it.) A block
that imports torch is compiled here and run only where torch is
installed: the test environment does not download torch. With
PER_NEED_TORCH=1 (CI's torch stage) a missing torch fails instead. A block that uses per.cuda runs only where per._cuda and a GPU
are (tools/gpu-check.sh, which sets PER_NEED_CUDA=1 so that there a
missing one fails); elsewhere it is compiled."""

import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
PYTHON = ROOT / "docs" / "PYTHON.md"


def readme_blocks():
    text = README.read_text(encoding="utf-8")
    found = []
    for title in ("Quick start: Python", "Quick start: PyTorch on the GPU"):
        assert f"\n## {title}\n" in text, f"README.md has no '## {title}'"
        section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
        got = re.findall(r"```python\n(.*?)```", section, re.S)
        assert got, f"README.md has no python block under '## {title}'"
        found += [(README, c) for c in got]
    return found


def python_doc_blocks():
    text = PYTHON.read_text(encoding="utf-8")
    return [(PYTHON, c) for c in re.findall(r"```python\n(.*?)```", text, re.S)]


def blocks():
    """(file, code) of every block this test runs."""
    return readme_blocks() + python_doc_blocks()


def needs_cuda(code):
    return re.search(r"^import per\.cuda\b", code, re.M) is not None


def have_gpu():
    try:
        import per.cuda as pc
    except ImportError:
        return False
    return pc.available() and pc.device_count() > 0


def needs_torch(code):
    return re.search(r"^import torch\b", code, re.M) is not None


def run_blocks(with_torch):
    """Runs, in order, every block that imports torch (with_torch) or
    every one that does not, skipping those that need per.cuda without a
    GPU and per._cuda; returns how many ran."""
    ran = 0
    gpu = with_torch and have_gpu()
    assert gpu or os.environ.get("PER_NEED_CUDA") != "1" or not with_torch, \
        "PER_NEED_CUDA=1 but per._cuda, torch or a GPU is missing"
    for path, code in blocks():
        compiled = compile(code, str(path), "exec")
        if needs_torch(code) != with_torch:
            continue
        if needs_cuda(code) and not gpu:
            continue
        exec(compiled, {})
        ran += 1
    return ran


def test_readme_python_blocks_run():
    """The blocks without torch (every run of the suite)."""
    found = blocks()
    assert python_doc_blocks(), "docs/PYTHON.md has no python block"
    assert any(not needs_torch(c) for _, c in found), "no block runs without torch"
    assert any(needs_cuda(c) for _, c in readme_blocks()), "no per.cuda quick start"
    assert run_blocks(with_torch=False) > 0


def test_readme_torch_blocks_run():
    """The blocks that import torch: where torch is (CI's torch stage,
    with PER_NEED_TORCH=1, where a missing torch fails); the per.cuda
    ones where a GPU is too (PER_NEED_CUDA=1: tools/gpu-check.sh)."""
    if importlib.util.find_spec("torch") is None:
        assert os.environ.get("PER_NEED_TORCH") != "1", \
            "PER_NEED_TORCH=1 but torch is not installed"
        pytest.skip("torch is not installed")
    assert run_blocks(with_torch=True) > 0


def test_docs_have_the_pytorch_loop():
    """docs/PYTHON.md's PyTorch learner step (CI's torch stage runs it)."""
    torch_blocks = [c for _, c in python_doc_blocks() if needs_torch(c) and not needs_cuda(c)]
    assert len(torch_blocks) == 1
    code = torch_blocks[0]
    for call in ("buf.sample(", "weights", "buf.update("):
        assert call in code
