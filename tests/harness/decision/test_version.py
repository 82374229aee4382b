"""The checks' version names what decides: it moves with the check list and the judging policy, not with how long
an evaluation measures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import checks
from harness.decision import version
from harness.decision.version import checks_version
from harness.policy import EvalPolicy


def test_the_version_is_a_stable_digest_of_the_checks_and_the_policy() -> None:
    current = checks_version()
    assert current == checks_version(EvalPolicy()) == checks_version(EvalPolicy().model_dump(mode="json"))
    assert current.startswith("checks-") and len(current) == len("checks-") + 12


def test_resource_knobs_leave_it_alone_and_judging_fields_move_it() -> None:
    assert checks_version(EvalPolicy(timing_budget_s=5.0, memory_limit_mb=512)) == checks_version()
    assert checks_version(EvalPolicy(static_policy="strict")) != checks_version()
    assert checks_version(EvalPolicy(trials=2)) != checks_version()
    assert checks_version(EvalPolicy(knockout=False)) != checks_version()


def test_a_registry_row_that_decides_otherwise_or_a_revision_moves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    current = checks_version()
    monkeypatch.setattr(checks, "ROWS", checks.ROWS[:-1])  # a check fewer
    assert checks_version() != current
    monkeypatch.undo()
    strict_only = replace(checks.ROWS[0], levels=checks.STRICT)  # the first check decides under strict only
    monkeypatch.setattr(checks, "ROWS", (strict_only, *checks.ROWS[1:]))
    assert checks_version() != current
    monkeypatch.undo()
    reworded = replace(checks.ROWS[0], doc="the same check, described in other words")
    monkeypatch.setattr(checks, "ROWS", (reworded, *checks.ROWS[1:]))
    assert checks_version() == current  # prose is not what decides
    monkeypatch.undo()
    monkeypatch.setattr(version, "CHECKS_REVISION", version.CHECKS_REVISION + 1)
    assert checks_version() != current
