"""Timed regions never overlap on one device, however evaluations are started."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness import EvalPolicy, Verdict, evaluate
from harness import timed_calls
from harness.timing_slot import timing_slot
from kernelbench.bundled import find_bundled
from tests.conftest import RELU_CANDIDATE


def test_the_slot_excludes_threads_of_one_process() -> None:
    inside, overlaps = [0], []
    lock = threading.Lock()

    def hold() -> None:
        with timing_slot("cpu"):
            with lock:
                inside[0] += 1
                overlaps.append(inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: hold(), range(8)))
    assert max(overlaps) == 1


@pytest.mark.slow
def test_best_of_n_evaluations_are_timed_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two evaluations started together (as `optimize --candidates 2` does): their timed regions must not overlap;
    this fails if timing is ever done concurrently again."""
    intervals: list[tuple[float, float]] = []
    measure = timed_calls.Timing.measure

    def recorded(self: timed_calls.Timing) -> timed_calls.TimedRun:
        began = time.perf_counter()
        try:
            return measure(self)
        finally:
            intervals.append((began, time.perf_counter()))

    monkeypatch.setattr(timed_calls.Timing, "measure", recorded)
    policy = EvalPolicy(timing_budget_s=0.2)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: evaluate(find_bundled("relu"), RELU_CANDIDATE.read_text(), "cpu", policy),
                                range(2)))
    assert all(r.verdict is Verdict.ACCEPTED for r in results)
    (a_start, a_end), (b_start, b_end) = sorted(intervals)
    assert a_end <= b_start, f"timed regions overlapped: {intervals}"
