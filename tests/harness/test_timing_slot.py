"""Timed regions never overlap on one device, however evaluations are started."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from harness import EvalPolicy, timed_calls
from harness.timing_slot import timing_slot
from kernelwright.optimize_service import run_optimize
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
def test_optimize_best_of_four_times_one_candidate_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`optimize --candidates 4` through the real local executor and harness: four kernels of one round (the same
    C++ source, so one cached build) are timed one after another; this fails if timing ever overlaps again."""
    intervals: list[tuple[float, float]] = []
    measure = timed_calls.Timing.measure

    def recorded(self: timed_calls.Timing) -> timed_calls.TimedRun:
        began = time.perf_counter()
        try:
            return measure(self)
        finally:
            intervals.append((began, time.perf_counter()))

    monkeypatch.setattr(timed_calls.Timing, "measure", recorded)
    kernels = [RELU_CANDIDATE.read_text() + f"\n# variant {slot}\n" for slot in range(4)]
    script = tmp_path / "four.json"
    script.write_text(json.dumps({"replies": [{"purpose": "coder", "content": f"```python\n{k}```"} for k in kernels]}))
    config = OptimizeConfig(device="cpu", rounds=1, candidates=4, workers=4, policy=EvalPolicy(timing_budget_s=0.2))
    summary = run_optimize("relu", config, ModelSpec(model=f"scripted:{script}"), f"sqlite:///{tmp_path / 't.db'}")
    assert summary["best"]["verdict"] == "accepted" and len(intervals) == 4
    ordered = sorted(intervals)
    assert all(a[1] <= b[0] for a, b in zip(ordered, ordered[1:])), f"timed regions overlapped: {intervals}"
