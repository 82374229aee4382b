"""No silently weaker path (issue 36): every evaluation says which protocol timed it; a speedup from the
child-staged protocol (where the parent cannot drive the calls: CUDA, or a machine without a writable cgroup
freezer, a sealable shared file or reading a child's memory) carries a `[protocol]` reason, and strict refuses it."""

from __future__ import annotations

import pytest

import harness.gathering.gather as gathering
from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check, Verdict
from kernelbench.bundled import find_bundled
from tests.conftest import RELU_CANDIDATE

pytestmark = pytest.mark.slow
FAST = EvalPolicy(timing_budget_s=0.3, timed_checks=30)


def _child_staged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gathering, "parent_driven", lambda device: False)


def test_the_parent_driven_protocol_is_named_and_adds_no_reason() -> None:
    evaluation = evaluate(find_bundled("relu"), RELU_CANDIDATE.read_text(), "cpu", FAST)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert evaluation.isolation["protocol"] == "parent-driven"
    assert not any(r.startswith("[protocol]") for r in evaluation.reasons)


@pytest.mark.proves(Check.PROTOCOL)
def test_a_child_staged_speedup_says_so_and_strict_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _child_staged(monkeypatch)
    default = evaluate(find_bundled("relu"), RELU_CANDIDATE.read_text(), "cpu", FAST)
    assert default.verdict is Verdict.ACCEPTED, default.reasons
    assert default.isolation["protocol"] == "child-staged"
    assert default.reasons[0].startswith("[protocol]") and "not protected" in default.reasons[0]
    strict = evaluate(find_bundled("relu"), RELU_CANDIDATE.read_text(), "cpu",
                      FAST.model_copy(update={"static_policy": "strict"}))
    assert strict.verdict is Verdict.REJECTED and strict.reasons[0].startswith("[protocol]"), strict.reasons
