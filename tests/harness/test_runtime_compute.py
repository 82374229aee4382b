"""The kernel does the work, decided at run time (issue 31, family 4): PyTorch compute that forward runs outside
the candidate's kernels is seen however it is reached (inherited, a module-level helper, a name built at run
time), which reading `forward`'s body missed. Strict rejects it; default says it. The census is one extra call
(harness/child/census.py): a hint about an honest model's forward, not proof against a hostile one. The kernels'
share of forward's time is clocked over a batch among the timed calls, outside any dispatch mode: a kernel
doing a negligible part of it is credited no speedup."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from kernelbench.bundled import bundled_candidate, find_bundled
from kernelbench.problem import problem_from_source
from tests.conftest import relu_variant

pytestmark = pytest.mark.slow
RELU = find_bundled("relu")
FAST = EvalPolicy(timing_budget_s=0.1, timed_checks=30)
STRICT = FAST.model_copy(update={"static_policy": "strict"})

THROUGH_A_HELPER = relu_variant("return relu_ext.relu_forward(_prepared(x))", prelude=(
    "def _prepared(t):\n    return getattr(torch, 'rel' + 'u')(t)  # a name the source scan never sees spelled out"))
THROUGH_THE_PARENT = relu_variant("return relu_ext.relu_forward(super(type(self), self).forward(x))",
                                  prelude="class _Base(nn.Module):\n    def forward(self, x):\n        return x.clamp(min=0)")


@pytest.mark.parametrize("source", [THROUGH_A_HELPER, THROUGH_THE_PARENT], ids=["helper", "inherited"])
def test_library_compute_however_reached_is_rejected_by_strict(source: str) -> None:
    source = source.replace("class ModelNew(nn.Module):", "class ModelNew(_Base):") if "_Base" in source else source
    evaluation = evaluate(RELU, source, "cpu", STRICT)
    assert evaluation.verdict is Verdict.REJECTED, evaluation.reasons
    assert evaluation.reasons[0].startswith("[runtime-compute]"), evaluation.reasons


def test_default_says_which_operators_and_credits_no_speedup_when_the_library_did_the_work() -> None:
    """The library's relu is the whole of the reference's work; the kernel's relu after it is redundant. Default
    accepted it with a note on e19f4ec (the kernel held half of forward's time); the credit is by work now (issue
    44): the library did 100% of the reference's FLOPs. A library op for a small part stays accepted:
    tests/harness/test_library_work.py."""
    evaluation = evaluate(RELU, THROUGH_A_HELPER, "cpu", FAST)
    assert evaluation.verdict is Verdict.REJECTED, evaluation.reasons
    said = evaluation.reasons[0]
    assert said.startswith("[runtime-compute]") and "aten.relu" in said and "of forward's time" in said
    assert "under 5%" in said and "100% of the reference's work" in said, said
    found = evaluation.isolation["runtime_compute"]
    assert set(found["ops"]) == {"aten.relu"} and found["ops"]["aten.relu"] == found["calls"]  # one per call
    assert f"aten.relu x{found['calls']} over {found['calls']} audited calls" in said


def test_a_kernel_doing_all_the_work_stays_accepted_under_strict() -> None:
    """The honest control: the bundled ReLU (its own output allocation and a contiguous() are bookkeeping)."""
    evaluation = evaluate(RELU, bundled_candidate(RELU, "cpu").read_text(), "cpu", STRICT)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert not any(r.startswith("[runtime-compute]") for r in evaluation.reasons)


# float64 matmul, cast back: the library's float32 matmul is faster and inside the tolerance
MATMUL64 = problem_from_source('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A.double(), B.double()).float()

def get_inputs():
    return [torch.randn(256, 256), torch.randn(256, 256)]

def get_init_inputs():
    return []
''', "matmul64", level=1)


def test_a_touch_kernel_beside_a_library_matmul_is_credited_nothing() -> None:
    """The issue's form: the library's matmul computes the answer, the kernel passes one row through (relu of its
    magnitude, times its sign), so the knock-out's NaN still reaches the output. The census call read the kernels'
    share as 13% (its dispatch mode charged every op the kernel's C++ made inside it to the kernel) and it was
    accepted at 1.4x on e163ad2; clocked on a timed batch the share is 2%."""
    touch = relu_variant("y = torch.matmul(A, B)\ny[0] = relu_ext.relu_forward(y[0].abs()) * y[0].sign()\nreturn y")
    evaluation = evaluate(MATMUL64, touch.replace("def forward(self, x):", "def forward(self, A, B):"), "cpu", FAST)
    assert evaluation.verdict is Verdict.REJECTED, evaluation.reasons
    assert evaluation.reasons[0].startswith("[runtime-compute]") and "under 5%" in evaluation.reasons[0]
    assert evaluation.isolation["audits"]["kernel_share"] < 0.05


def test_library_compute_only_after_the_first_calls_is_seen_by_the_census_among_the_timed_calls() -> None:
    """Strict's census used to be one call of its own right after the trials: a forward that runs its kernel
    alone for its first 12 calls and adds PyTorch's compute afterwards was accepted under strict on e163ad2. The
    census is now an audit batch among the timed calls, where no count tells it apart."""
    source = relu_variant("self.calls = getattr(self, 'calls', 0) + 1\n"
                          "if self.calls <= 12:  # the trials and the census came first\n"
                          "    return relu_ext.relu_forward(x)\n"
                          "return relu_ext.relu_forward(getattr(torch, 'rel' + 'u')(x))")
    evaluation = evaluate(RELU, source, "cpu", STRICT)
    assert evaluation.verdict is Verdict.REJECTED, evaluation.reasons
    assert evaluation.reasons[0].startswith("[runtime-compute]") and "aten.relu" in evaluation.reasons[0]
