"""Honest precision: a speedup's interval covers what a rerun prints, and noise is never counted as a speedup.

The A/A candidate (harness/measurement/self_check.py) is the problem's own Model timed as a candidate: its right
answer is 1.00x, so an interval that leaves 1.0 out, or a `speedup_significant`, is the harness claiming precision it does
not have. Measured on a loaded 2-core machine before the noise floor: self-checks read 0.81-1.43x with one-pair
bootstrap intervals that excluded 1.0 in most runs.
"""

from __future__ import annotations

import multiprocessing
import time

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from harness.measurement.noise import Load, noise_findings, significant, widened
from harness.measurement.self_check import self_check_policy, self_check_source
from kernelbench.bundled import bundled_candidate, find_bundled

FAST = EvalPolicy(timing_budget_s=0.5)
SELF = self_check_policy(FAST)


def test_the_interval_is_widened_by_the_aa_spread() -> None:
    low, high = widened((0.98, 1.02), (0.95, 1.01))  # two copies of the reference 5% apart at worst
    assert low == pytest.approx(0.98 * 0.95) and high == pytest.approx(1.02 / 0.95)
    assert not significant((low, high)) and significant((1.01, 1.2)) and significant((0.5, 0.9))


def test_noise_findings_name_the_aa_spread_and_the_machines_pressure() -> None:
    quiet = Load(pressure=1.0, runnable=1, cpus=2)
    assert noise_findings(1.0, (0.99, 1.01), (quiet, quiet)) == []
    assert noise_findings(1.0, (0.99, 1.01), None) == []  # no PSI, a tight pair: nothing to say
    spread = noise_findings(1.1, (1.05, 1.15), (quiet, quiet))
    assert len(spread) == 1 and spread[0].check == "noise" and "15%" in spread[0].message
    busy = Load(pressure=60.0, runnable=5, cpus=2)
    assert any("PSI" in r.message for r in noise_findings(1.0, (0.99, 1.01), (quiet, busy)))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["relu", "softmax"])
def test_the_reference_against_itself_is_not_a_speedup(name: str) -> None:
    problem = find_bundled(name)
    evaluation = evaluate(problem, self_check_source(problem), "cpu", SELF)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    low, high = evaluation.speedup_ci
    assert low <= 1.0 <= high, (evaluation.speedup_ci, evaluation.isolation["precision"])
    assert evaluation.speedup_significant is False
    assert evaluation.noise_floor is not None
    precision = evaluation.isolation["precision"]
    assert precision["within_run_ci"] and precision["aa_ci"] == [round(v, 4) for v in evaluation.noise_floor]


@pytest.mark.slow
def test_a_clearly_faster_kernel_stays_significant() -> None:
    """The honest control: the bundled max reduction (measured 2.4-2.9x here) clears the floor."""
    problem = find_bundled("Max_reduction_over_a_dimension")
    evaluation = evaluate(problem, bundled_candidate(problem, "cpu").read_text(), "cpu", FAST)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert evaluation.speedup_significant is True and evaluation.speedup_ci[0] > 1.2, evaluation.speedup_ci


def _spin(until: float) -> None:
    while time.time() < until:
        pass


@pytest.mark.slow
def test_a_loaded_machine_gets_a_noise_reason() -> None:
    """Busy processes on every CPU, started by the test: the verdict says the interval is the machine's."""
    problem = find_bundled("relu")
    source = self_check_source(problem)
    context = multiprocessing.get_context("spawn")
    spinners = [context.Process(target=_spin, args=(time.time() + 60,)) for _ in range(2 * (multiprocessing.cpu_count()))]
    for spinner in spinners:
        spinner.start()
    try:
        time.sleep(3)  # PSI's 10-second average rises
        evaluation = evaluate(problem, source, "cpu", SELF)
    finally:
        for spinner in spinners:
            spinner.kill()
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert any(r.startswith("[noise]") for r in evaluation.reasons), (evaluation.reasons, evaluation.isolation)
