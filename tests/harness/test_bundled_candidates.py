"""No false rejections: the honest kernel shipped with every bundled problem is accepted."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from kernelbench.bundled import bundled_candidate, bundled_problems

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("problem", bundled_problems(), ids=lambda p: p.key)
def test_bundled_candidate_is_accepted(problem) -> None:
    evaluation = evaluate(problem, bundled_candidate(problem).read_text(), "cpu", EvalPolicy(timing_budget_s=0.2))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert evaluation.speedup is not None and evaluation.speedup > 0
