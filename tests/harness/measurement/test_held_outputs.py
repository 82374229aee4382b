"""Outputs the caller holds never change (harness/measurement/held_outputs.py).

One call per batch (as a 64 MB problem runs), so the in-batch aliasing check never sees two outputs: a buffer
reused from call to call, switched on only after the correctness trials, was accepted before (2.2-2.7x on a 64 MB
problem, which skips fresh memory's page faults). A caching allocator that reuses only what the caller released is
honest and stays accepted."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check, Verdict
from kernelbench.bundled import find_bundled
from tests.conftest import relu_variant

pytestmark = pytest.mark.slow
RELU = find_bundled("relu")
ONE_CALL_PER_BATCH = EvalPolicy(timing_budget_s=0.2, static_policy="off", batch_target_ms=0.001, timed_checks=120)

AFTER_TRIALS = "self.calls = getattr(self, 'calls', 0) + 1\nout = relu_ext.relu_forward(x)\n"


def _held_output_finding(source: str) -> list[str]:
    evaluation = evaluate(RELU, source, "cpu", ONE_CALL_PER_BATCH)
    assert evaluation.verdict is Verdict.REJECTED, (evaluation.verdict, evaluation.reasons)
    assert evaluation.reasons[0].startswith("[held-output]"), evaluation.reasons
    return evaluation.reasons


@pytest.mark.proves(Check.HELD_OUTPUT)
def test_one_buffer_reused_after_the_trials_is_caught() -> None:
    source = relu_variant(AFTER_TRIALS + "if self.calls <= 20:\n    return out\n"
                         "if not hasattr(self, 'buffer'):\n    self.buffer = torch.empty_like(out)\n"
                         "self.buffer.copy_(out)\nreturn self.buffer")
    _held_output_finding(source)


@pytest.mark.proves(Check.HELD_OUTPUT)
def test_a_ring_of_buffers_is_caught_too() -> None:
    """Second form: a ring of five, named through getattr so no attribute name repeats in the source."""
    source = relu_variant(AFTER_TRIALS + "if self.calls <= 20:\n    return out\n"
                         "ring = getattr(self, 'r' + 'ing', None)\n"
                         "if ring is None:\n    ring = [torch.empty_like(out) for _ in range(5)]\n"
                         "    setattr(self, 'r' + 'ing', ring)\n"
                         "slot = ring[self.calls % len(ring)]\nslot.copy_(out)\nreturn slot")
    _held_output_finding(source)


def test_an_allocator_that_reuses_only_released_memory_stays_accepted() -> None:
    """The honest control: a buffer goes back into use only when nobody but the pool refers to it."""
    source = relu_variant(
        "out = relu_ext.relu_forward(x)\n"
        "free = [i for i in range(len(POOL)) if sys.getrefcount(POOL[i]) <= 2 and POOL[i].shape == out.shape]\n"
        "if not free:\n    POOL.append(torch.empty_like(out))\n    free = [len(POOL) - 1]\n"
        "POOL[free[0]].copy_(out)\nreturn POOL[free[0]]", prelude="import sys\nPOOL = []")
    evaluation = evaluate(RELU, source, "cpu", ONE_CALL_PER_BATCH)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert evaluation.isolation["timing"]["held_output_checks"] > 20
    assert evaluation.isolation["timing"]["batch_size"] == 1
