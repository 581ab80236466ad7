"""The README's Python examples run as they are (every ```python block of
its "## Python" and "## GPU" sections), so the documentation cannot rot.
A block that imports torch (the PyTorch loop) is compiled here and run
only where torch is installed: the test environment does not download
torch. With PER_NEED_TORCH=1 (CI's torch stage) a missing torch fails
instead. A block that uses per.cuda runs only where per._cuda and a GPU
are (tools/gpu-check.sh, which sets PER_NEED_CUDA=1 so that there a
missing one fails); elsewhere it is compiled."""

import importlib.util
import os
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent.parent / "README.md"


def blocks():
    text = README.read_text()
    found = []
    for title in ("Python", "GPU"):
        section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
        found += re.findall(r"```python\n(.*?)```", section, re.S)
    return found


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


def test_readme_python_blocks_run():
    found = blocks()
    assert found, "README.md has no python block under ## Python"
    assert any(not needs_torch(c) for c in found), "no block runs without torch"
    have_torch = importlib.util.find_spec("torch") is not None
    assert have_torch or os.environ.get("PER_NEED_TORCH") != "1", \
        "PER_NEED_TORCH=1 but torch is not installed"
    gpu = have_torch and have_gpu()
    assert gpu or os.environ.get("PER_NEED_CUDA") != "1", \
        "PER_NEED_CUDA=1 but per._cuda, torch or a GPU is missing"
    assert any(needs_cuda(c) for c in found), "no per.cuda block"
    for code in found:
        compiled = compile(code, str(README), "exec")
        if needs_torch(code) and not have_torch:
            continue
        if needs_cuda(code) and not gpu:
            continue
        exec(compiled, {})


def test_readme_has_the_pytorch_loop():
    torch_blocks = [c for c in blocks() if needs_torch(c) and not needs_cuda(c)]
    assert len(torch_blocks) == 1
    code = torch_blocks[0]
    for call in ("buf.sample(", "weights", "buf.update("):
        assert call in code
