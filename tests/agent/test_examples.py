"""The light-contract examples the coder is shown are real: the CPU one builds in seconds and is accepted, the
CUDA one compiles (compile-only here; `make gpu-check` runs it on a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import EvalPolicy, Verdict, evaluate
from kernelbench.bundled import find_bundled

EXAMPLES = Path(__file__).resolve().parents[2] / "agent" / "examples"
RELU = find_bundled("relu")
pytestmark = pytest.mark.slow


def test_the_cpu_example_is_accepted_with_no_finding_about_its_own_op() -> None:
    evaluation = evaluate(RELU, (EXAMPLES / "light_cpu.py").read_text(), "cpu", EvalPolicy(timing_budget_s=0.1,
                                                                                               static_policy="strict"))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert evaluation.build["kernel_calls"]["wrapped_functions"] == 1  # its op is counted and poisonable
    assert not [r for r in evaluation.reasons if r.startswith("[torch-compute]")]


@pytest.mark.nvcc
def test_the_cuda_example_compiles() -> None:
    evaluation = evaluate(RELU, (EXAMPLES / "light_cuda.py").read_text(), "cuda-compile-only", EvalPolicy())
    assert evaluation.verdict is Verdict.COMPILED, evaluation.reasons
