"""Two tiers of evaluation: screening ranks variants cheaply, the full protocol decides anything reported. A
screened number never reaches the store's results, a reward or (through the store) a table, report or the gate."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Evaluation, Verdict
from kernelbench.bundled import find_bundled
from rewards.reward import reward_of
from store import EvaluationRow, ScreenedEvaluation, open_store, record_evaluation
from tests.conftest import RELU_CANDIDATE


def _accepted(tier: str) -> Evaluation:
    return Evaluation(verdict=Verdict.ACCEPTED, tier=tier, problem_name="relu", problem_fingerprint="f" * 64,
                      candidate_hash="c" * 64, device="cpu", speedup=3.0, speedup_ci=(2.5, 3.5),
                      speedup_significant=True)  # significant: the interval reward pays it above parity


def test_screening_preset_drops_the_audits_and_keeps_the_checks() -> None:
    full = EvalPolicy(trials=4, atol_fp32=1e-3)
    screening = full.screening()
    assert (screening.tier, full.tier) == ("screening", "full")
    assert screening.process_pairs == 1 and not screening.noise_floor and not screening.envelope
    assert not screening.knockout and screening.timed_checks == 0
    assert screening.timing_budget_s <= full.timing_budget_s
    # correctness is judged as the full tier judges it: the same trials, tolerances and static policy
    assert (screening.trials, screening.atol_fp32, screening.static_policy) == (4, 1e-3, full.static_policy)


def test_the_store_refuses_a_screened_evaluation(tmp_path: Path) -> None:
    sessions = open_store(f"sqlite:///{tmp_path / 'tiers.db'}")
    problem = find_bundled("relu")
    with pytest.raises(ScreenedEvaluation, match="screening-tier"):
        record_evaluation(sessions, problem, "source", _accepted("screening"))
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 0
    record_evaluation(sessions, problem, "source", _accepted("full"))  # the control: a full result is stored
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 1


def test_a_screened_record_earns_no_reward() -> None:
    assert reward_of(_accepted("full")) > 1.0
    assert reward_of(_accepted("screening")) == 0.0
    assert reward_of(_accepted("screening").model_dump(mode="json")) == 0.0
    assert reward_of(_accepted("full").model_dump(mode="json")) > 1.0
    legacy = _accepted("full").model_dump(mode="json")
    del legacy["tier"]  # a record stored before tiers existed was a full evaluation
    assert reward_of(legacy) > 1.0


@pytest.mark.slow
def test_screening_the_bundled_relu_says_its_tier() -> None:
    problem = find_bundled("relu")
    evaluation = evaluate(problem, RELU_CANDIDATE.read_text(), "cpu", EvalPolicy(envelope=False).screening())
    assert evaluation.accepted and evaluation.tier == "screening" and evaluation.screened
    assert evaluation.noise_floor is None and evaluation.speedup is not None
