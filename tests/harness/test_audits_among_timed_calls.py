"""The audits made among the timed calls (issue 31, "the kernel does the work"): the knock-out is one timed call,
at a position only the parent draws, with the candidate's kernel functions poisoned; the kernels' share of
forward's time is clocked over another batch among them. A forward that puts its kernel on the output path only
where the harness used to look (the first calls: trials, a knock-out call of its own, the census) is caught on the
timed calls themselves; an honest kernel stays accepted."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check, Verdict
from kernelbench.problem import problem_from_source
from tests.conftest import relu_variant

pytestmark = pytest.mark.slow
DEFAULT = EvalPolicy(timing_budget_s=0.2)

# A ReLU written the long way round (a mask, a zero tensor, a select): the library's own relu is ~2-3x faster,
# so a forward that returns torch.relu instead of its kernel's answer gains that much.
WHERE_RELU = problem_from_source('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, torch.zeros_like(x))

def get_inputs():
    return [torch.randn(16, 16384)]

def get_init_inputs():
    return []
''', "where_relu", level=1)


@pytest.mark.proves(Check.GHOST_KERNEL)
def test_a_kernel_on_the_output_path_only_for_the_first_calls_is_a_ghost_on_the_timed_ones() -> None:
    """The first 12 calls (the trials, the knock-out and the census, which came first and always in that order)
    return the kernel's answer; every later call runs the kernel on a slice (so every call counts a kernel call
    and the kernels' clocked share stays over 5%) and returns the library's relu. With the knock-out as a call of
    its own (e163ad2) or switched off: accepted at 7.6x (measured, the honest kernel: 7.1x); the knock-out among
    the timed calls poisons a call whose answer did not come from the kernel."""
    source = relu_variant(
        "self.calls = getattr(self, 'calls', 0) + 1\n"
        "if self.calls <= 12:  # the trials, the knock-out and the census come first\n"
        "    return relu_ext.relu_forward(x)\n"
        "relu_ext.relu_forward(x[:4])  # the kernel runs on every call, as the checks count them\n"
        "return torch.relu(x)")
    evaluation = evaluate(WHERE_RELU, source, "cpu", DEFAULT)
    assert evaluation.verdict is Verdict.REJECTED, evaluation.reasons
    assert evaluation.reasons[0].startswith("[ghost-kernel]") and "poisoned" in evaluation.reasons[0], \
        evaluation.reasons


def test_an_honest_kernel_on_every_call_stays_accepted_with_its_share_said() -> None:
    """The control: the same kernel on every call is on the output path wherever the knock-out lands, and its
    clocked share is far over 5% (the bundled CPU candidates: 62-99% of forward's time; this one 33-69% on a
    loaded machine, where forward's call overhead weighs against a 1 MB ReLU)."""
    evaluation = evaluate(WHERE_RELU, relu_variant("return relu_ext.relu_forward(x)"), "cpu", DEFAULT)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert not any(r.startswith(("[ghost-kernel]", "[runtime-compute]")) for r in evaluation.reasons)
    assert evaluation.isolation["audits"]["knockouts"] >= 1
    assert evaluation.isolation["audits"]["kernel_share"] > 0.2
