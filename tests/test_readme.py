"""The README's Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import requires_gcc


@requires_gcc
def test_readme_python_example():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has a Python example"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
