"""The README's Python examples run as they are (every ```python block of
its "## Python" section), so the documentation cannot rot."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent.parent / "README.md"


def blocks():
    text = README.read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_python_blocks_run():
    found = blocks()
    assert found, "README.md has no python block under ## Python"
    for code in found:
        exec(compile(code, str(README), "exec"), {})
