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


_EXAMPLE_LOOP = ("    #pragma omp parallel for simd\n"
                 "    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > 0.0f ? src[i] : 0.0f;\n")
_OWN_LOOP = """    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {  // four lanes a step, then the tail
        for (int64_t k = 0; k < 4; ++k) {
            const float v = src[i + k];
            dst[i + k] = v > 0.0f ? v : 0.0f;
        }
    }
    for (; i < n; ++i) {
        const float v = src[i];
        dst[i] = v > 0.0f ? v : 0.0f;
    }
"""


def own_light_relu(namespace: str) -> str:
    """A light-form ReLU of the model's own (the contract's example with its loop unrolled by hand, op namespace
    `namespace`): not a copy of the example, so a run that accepts it has found a kernel."""
    example = (Path(__file__).resolve().parents[2] / "agent" / "examples" / "light_cpu.py").read_text()
    assert _EXAMPLE_LOOP in example
    return example.replace(_EXAMPLE_LOOP, _OWN_LOOP).replace("kw_relu", namespace)
