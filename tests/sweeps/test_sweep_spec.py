"""A sweep's stored config is read through SweepSpec: one stored by fe781af (before the type existed) loads, and
what `sweep` plans from its options is one execution shared by the sweep and each problem's optimize run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent.run_spec import Execution, SweepSpec
from kernelwright.eval_service import UsageError
from kernelwright.sweep_service import per_round, sweep_config

FIXTURE = Path(__file__).parent.parent / "store" / "fixtures" / "fe781af.db"


def test_a_sweep_stored_by_fe781af_loads() -> None:
    with sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True) as db:
        (stored,) = [json.loads(c) for (c,) in db.execute("SELECT config FROM runs WHERE kind = 'sweep'")]
    spec = SweepSpec.from_stored(stored)
    assert spec.sweep.mode == "optimize" and spec.sweep.device == "cpu" and spec.models is not None
    assert len(spec.fingerprints) == len(spec.sweep.problem_keys) == 1
    assert SweepSpec.from_stored(spec.model_dump()) == spec


def test_execution_is_planned_once_for_the_sweep_and_its_optimize_runs() -> None:
    execution = Execution(device="cpu", workers=2, executor="local")
    config = sweep_config(execution, None, rounds=3, candidates="2", timeout_s=60.0, build_timeout_s=90.0,
                          baselines=False, profile=False, shrink=True)
    assert config.mode == "optimize" and config.optimize is not None
    assert (config.device, config.workers) == (config.optimize.device, config.optimize.workers) == ("cpu", 2)
    assert config.optimize.policy == config.policy and config.policy.timeout_s == 60.0
    assert (config.optimize.rounds, config.optimize.candidates) == (3, 2)
    verify = sweep_config(execution, Path("solutions"), 3, None, 60.0, 90.0, False, False, False)
    assert verify.mode == "candidates" and verify.optimize is None and verify.candidates_dir == "solutions"


def test_candidates_is_a_count_not_a_folder() -> None:
    assert per_round(None) == 1 and per_round("4") == 4
    with pytest.raises(UsageError, match="use --solutions sols"):
        per_round("sols")


def test_a_device_outside_the_type_is_refused() -> None:
    with pytest.raises(ValueError):
        Execution(device="tpu")
