"""Timing statistics (harness/measurement/timing.py): the bootstrap interval of the speedup."""

from __future__ import annotations

import random

import pytest

from harness.measurement.timing import speedup_interval


def test_the_speedup_interval_brackets_the_true_ratio_and_narrows_with_samples() -> None:
    rng = random.Random(1)
    ref = [2.0 + rng.gauss(0, 0.1) for _ in range(400)]
    candidate = [1.0 + rng.gauss(0, 0.05) for _ in range(400)]
    low, high = speedup_interval(ref, candidate)
    assert low < 2.0 < high and high - low < 0.05
    few_low, few_high = speedup_interval(ref[:20], candidate[:20])
    assert few_high - few_low > high - low  # fewer samples, wider interval
    assert speedup_interval(ref, candidate) == (low, high)  # deterministic for a seed


def test_pairs_are_resampled_together_so_a_shared_drift_cancels() -> None:
    drift = [1.0 + 0.5 * (i % 2) for i in range(200)]  # the machine alternates fast/slow, both models alike
    low, high = speedup_interval([2.0 * d for d in drift], drift)
    assert low == high == 2.0
    with pytest.raises(ValueError):
        speedup_interval([], [])


def test_cuda_events_are_believed_where_the_parents_clock_backs_them() -> None:
    from harness.measurement.timing import believed_samples

    ref_clock, cand_clock = [0.040] * 5, [0.030] * 5  # both pay ~0.03 ms of launch, flush and pipe per call
    ref_events, cand_events = [0.010] * 5, [0.0025] * 5
    ref, cand, doubt = believed_samples(ref_clock, cand_clock, ref_events, cand_events)
    assert (ref, cand, doubt) == (ref_events, cand_events, None)  # 4x on events, where the clock compresses it


def test_work_outside_the_candidates_events_falls_back_to_the_clock() -> None:
    from harness.measurement.timing import believed_samples

    ref_clock, cand_clock = [0.040] * 5, [5.0] * 5  # 5 ms per call on the wall, 2.5 us in its events
    ref, cand, doubt = believed_samples(ref_clock, cand_clock, [0.010] * 5, [0.0025] * 5)
    assert (ref, cand) == (ref_clock, cand_clock) and doubt and doubt.check == "timing"
    assert believed_samples(ref_clock, cand_clock, [], []) == (ref_clock, cand_clock, None)  # the CPU: no events
