"""The checks' version names what decides: it moves with the check list and the judging policy, not with how long
an evaluation measures."""

from __future__ import annotations

import pytest

from harness import EvalPolicy, checks_version
from harness.decision import gates, version


def test_the_version_is_a_stable_digest_of_the_checks_and_the_policy() -> None:
    current = checks_version()
    assert current == checks_version(EvalPolicy()) == checks_version(EvalPolicy().model_dump(mode="json"))
    assert current.startswith("checks-") and len(current) == len("checks-") + 12


def test_resource_knobs_leave_it_alone_and_judging_fields_move_it() -> None:
    assert checks_version(EvalPolicy(timing_budget_s=5.0, memory_limit_mb=512)) == checks_version()
    assert checks_version(EvalPolicy(static_policy="strict")) != checks_version()
    assert checks_version(EvalPolicy(trials=2)) != checks_version()
    assert checks_version(EvalPolicy(knockout=False)) != checks_version()


def test_a_new_check_or_a_revision_moves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    current = checks_version()
    monkeypatch.setattr(gates, "GATES", gates.GATES[:-1])
    assert checks_version() != current
    monkeypatch.undo()
    monkeypatch.setattr(version, "CHECKS_REVISION", version.CHECKS_REVISION + 1)
    assert checks_version() != current
