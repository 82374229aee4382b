import math

import pytest

from reports.metrics import by_level, summarize

RESULTS = [
    {"level": 1, "verdict": "accepted", "speedup": 2.0},
    {"level": 1, "verdict": "accepted", "speedup": 0.5},
    {"level": 1, "verdict": "incorrect", "speedup": None},
    {"level": 2, "verdict": "accepted", "speedup": 1.2},
    {"level": 2, "verdict": "missing", "speedup": None},
]


def test_fast_p_is_over_all_problems_and_failures_are_counted() -> None:
    m = summarize(RESULTS)
    assert m["problems"] == 5 and m["correct"] == 3 and m["correctness_rate"] == pytest.approx(0.6)
    assert m["fast_p"] == {"0": 0.6, "0.5": 0.4, "0.8": 0.4, "1": 0.4, "1.5": 0.2, "2": 0.0}
    assert m["geomean_speedup_correct"] == pytest.approx(math.exp((math.log(2) + math.log(0.5) + math.log(1.2)) / 3))
    assert m["failures"] == {"incorrect": 1, "missing": 1}


def test_per_level_and_all() -> None:
    levels = by_level(RESULTS)
    assert set(levels) == {"all", "level1", "level2"}
    assert levels["level1"]["problems"] == 3 and levels["level2"]["correct"] == 1 and levels["all"]["problems"] == 5


def test_empty_sweep() -> None:
    m = summarize([])
    assert m["problems"] == 0 and m["geomean_speedup_correct"] is None and m["fast_p"]["1"] == 0.0


def test_degenerate_problems_are_counted_apart() -> None:
    from reports.metrics import summarize

    rows = [{"verdict": "accepted", "speedup": 2.0}, {"verdict": "degenerate", "speedup": None},
            {"verdict": "incorrect", "speedup": None}]
    summary = summarize(rows)
    assert summary["problems"] == 2 and summary["degenerate"] == 1
    assert summary["fast_p"]["1"] == 0.5 and summary["geomean_speedup_correct"] == 2.0


def test_noise_is_not_counted_as_a_speedup() -> None:
    """An A/A sweep (every kernel the reference itself) reads a little above or below 1.0 each time: with the
    intervals that cover 1.0, fast_1 is 0 and the geomean is 1.0, while a clearly faster kernel still counts."""
    aa = [{"level": 1, "verdict": "accepted", "speedup": s, "speedup_ci": [s * 0.9, s * 1.1]}
          for s in (1.04, 0.97, 1.08, 0.95)]
    m = summarize(aa)
    assert m["fast_p"]["1"] == 0.0 and m["fast_p"]["0.8"] == 1.0
    assert m["geomean_speedup_correct"] == pytest.approx(1.0) and m["within_noise"] == 4
    assert m["geomean_speedup_point"] == pytest.approx(math.exp(sum(math.log(s) for s in (1.04, 0.97, 1.08, 0.95)) / 4))
    faster = summarize(aa + [{"level": 1, "verdict": "accepted", "speedup": 1.6, "speedup_ci": [1.4, 1.8]}])
    assert faster["fast_p"]["1"] == pytest.approx(1 / 5) and faster["fast_p"]["1.5"] == 0.0  # 1.4 does not clear 1.5
