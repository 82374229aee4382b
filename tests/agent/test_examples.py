"""The light-contract examples the coder is shown are real: the CPU ones build in seconds and are accepted under
`strict`, the CUDA ones compile (compile-only here; `make gpu-check` runs them on a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from kernelbench.bundled import find_bundled
from kernelbench.problem import Problem

EXAMPLES = Path(__file__).resolve().parents[2] / "agent" / "examples"
RELU = find_bundled("relu")
pytestmark = pytest.mark.slow
WEIGHTED_SUM = Problem(name="Weighted_sum_over_a_dimension", source='''import torch
import torch.nn as nn


class Model(nn.Module):
    """(x * weight).sum(dim): an int constructor argument, a learned weight, an output of another shape."""

    def __init__(self, dim: int, size: int):
        super().__init__()
        self.dim = dim
        self.weight = nn.Parameter(torch.randn(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = [1] * x.dim()
        shape[self.dim] = -1
        return (x * self.weight.view(shape)).sum(dim=self.dim)


def get_inputs():
    return [torch.randn(8, 128, 96)]


def get_init_inputs():
    return [1, 128]
''')


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


def test_the_cpu_weighted_sum_example_is_accepted_strict() -> None:
    evaluation = evaluate(WEIGHTED_SUM, (EXAMPLES / "weighted_sum_cpu.py").read_text(), "cpu",
                          EvalPolicy(timing_budget_s=0.1, static_policy="strict"))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert not [r for r in evaluation.reasons if r.startswith("[torch-compute]")]


@pytest.mark.nvcc
def test_the_cuda_weighted_sum_example_compiles() -> None:
    evaluation = evaluate(WEIGHTED_SUM, (EXAMPLES / "weighted_sum_cuda.py").read_text(), "cuda-compile-only",
                          EvalPolicy(static_policy="strict"))
    assert evaluation.verdict is Verdict.COMPILED, evaluation.reasons
