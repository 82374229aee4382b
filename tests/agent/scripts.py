"""Scripted replies for agent tests: a repair round on the bundled ReLU kernel (its build is cached)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import RELU_CANDIDATE, relu_variant

WRONG = relu_variant("return relu_ext.relu_forward(x) * 0.5")
JUDGE = {"diagnosis": "the output is halved after the kernel", "change": "return the kernel's output unscaled"}


def relu_repair_script(folder: Path) -> Path:
    replies = [
        {"purpose": "coder", "content": f"First try:\n```python\n{WRONG}```"},
        {"purpose": "judge", "content": json.dumps(JUDGE)},
        {"purpose": "coder", "content": f"Fixed:\n```python\n{RELU_CANDIDATE.read_text()}```"},
        {"purpose": "judge", "content": '{"diagnosis": "memory bound", "change": "keep it"}'},
        {"purpose": "coder", "content": f"Unchanged:\n```python\n{RELU_CANDIDATE.read_text()}```"},
    ]
    path = folder / "relu_repair.json"
    path.write_text(json.dumps({"replies": replies}))
    return path
