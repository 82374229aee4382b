"""The parent's timing loop (harness/measurement/timed_calls.py) and its checks on timed calls
(harness/measurement/timed_checks.py), driven with scripted children: how many batches a precise speedup needs, and
what a probe accepts."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.isolation.protocol import as_wire
from harness.measurement.timed_calls import Timing
from harness.measurement.timed_checks import Tolerance, probes_agree, trial_tolerances
from harness.policy import EvalPolicy
from harness.verification.reference import ReferenceRun


class ScriptedChild:
    """Answers the timing commands like a child whose calls take `ms` each, times (1 + noise * gauss)."""

    def __init__(self, ms: float, noise: float, seed: int) -> None:
        self.ms, self.noise, self.rng = ms, noise, random.Random(seed)
        self.staged = 0

    def request(self, command: Any) -> dict[str, Any]:
        command = as_wire(command)
        assert command["cmd"] == "stage", command
        self.staged = len(command["calls"])
        return {"staged": self.staged}

    def timed(self, command: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        per_call = self.ms * max(0.1, 1 + self.noise * self.rng.gauss(0, 1))
        return int(per_call * self.staged * 1e6), {"done": self.staged}


def _reference() -> ReferenceRun:
    x = torch.randn(4, 8)
    return ReferenceRun(init_inputs=[], trial_seeds=[1], trial_inputs=[[x]], outputs=[torch.relu(x)],
                        model=torch.nn.ReLU())


def _batches(noise: float, precision: float) -> tuple[int, int]:
    policy = EvalPolicy(timing_budget_s=2.0, timing_precision=precision, hardening=False, batch_target_ms=1.0)
    timing = Timing(ScriptedChild(1.0, noise, 1), ScriptedChild(0.5, noise, 2), _reference(), policy, "cpu",
                    Path("."), pool_seed=3, seed=4)
    run = timing.measure()
    assert len(run.ref_ms) == len(run.candidate_ms)
    return len(run.ref_ms), run.pilot_batches


def test_a_steady_pair_is_timed_only_as_long_as_its_precision_needs() -> None:
    steady, pilot = _batches(noise=0.001, precision=0.01)
    budget, _ = _batches(noise=0.001, precision=0.0)
    assert pilot == 10 and steady == 10 < budget  # the pilot alone shows ±0.01 is already met


def test_a_noisy_pair_gets_more_batches_up_to_the_budget() -> None:
    noisy, pilot = _batches(noise=0.3, precision=0.01)
    budget, no_pilot = _batches(noise=0.3, precision=0.0)
    assert pilot == 10 and no_pilot == 0 and noisy == budget  # ±30% per batch: ±1% needs more than the budget
    somewhat, _ = _batches(noise=0.03, precision=0.01)
    assert 10 < somewhat < budget


def test_probes_pass_within_tolerance_and_fail_outside_it() -> None:
    float_bar = [Tolerance(False, 1e-4, 1e-4)]
    assert probes_agree([[1.0, 2.00001, math.nan]], [[1.0, 2.0, math.nan]], float_bar)
    assert not probes_agree([[1.0, 2.01]], [[1.0, 2.0]], float_bar)
    assert not probes_agree([[math.nan]], [[0.0]], float_bar)
    assert not probes_agree([[math.inf]], [[1e300]], float_bar)
    assert probes_agree([[3, 4]], [[3.0, 4.0]], [Tolerance(True, 0.0, 0.0)])
    assert not probes_agree([[3.0000001]], [[3.0]], [Tolerance(True, 0.0, 0.0)])


@pytest.mark.parametrize("untrusted", [None, "Lazy", [["1.0"]], [[True]], [[1.0], [2.0]], [[1.0, 2.0]], [{}], [[]]])
def test_a_probe_answer_of_any_other_shape_is_a_mismatch(untrusted: Any) -> None:
    assert not probes_agree(untrusted, [[1.0]], [Tolerance(False, 1e-4, 1e-4)])


def test_tolerances_follow_the_outputs_dtype_and_scale() -> None:
    reference = _reference()
    reference.outputs = [[torch.full((4,), 100.0), torch.ones(3, dtype=torch.int64), torch.zeros(2).half()]]
    floats, integers, halves = trial_tolerances(reference, EvalPolicy())[0]
    assert floats == Tolerance(False, 1e-4, pytest.approx(1e-2)) and integers.exact
    assert halves.rtol == EvalPolicy().atol_half and halves.atol == EvalPolicy().atol_half


def test_children_fix_the_allocator_thresholds_before_any_model_allocates() -> None:
    """glibc takes the fixed thresholds (each child calls this first thing, forked or exec'd)."""
    import platform
    import subprocess
    import sys

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc: the allocator is left as it is")
    probe = "from harness.child.main import steady_allocator; print(steady_allocator())"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "True"
