"""After a re-measure the speedup, interval and times come from one measurement (issue 44 item 6): e19f4ec printed
the lower speedup (31.05x) with the other measurement's interval ([37.14-59.26]) and times."""

from __future__ import annotations

from harness.decision.remeasured import keep_the_lower
from harness.records import Evaluation, TimingStats, Verdict


def _measured(speedup: float, low: float, high: float, candidate_ms: float) -> Evaluation:
    stats = TimingStats(samples_ms=[1.0], median_ms=1.0, p25_ms=1.0, p75_ms=1.0)
    return Evaluation(verdict=Verdict.ACCEPTED, problem_name="p", problem_fingerprint="f", candidate_hash="h",
                      device="cpu", speedup=speedup, speedup_ci=(low, high), speedup_significant=True,
                      ref_timing=stats, candidate_timing=stats.model_copy(update={"median_ms": candidate_ms}),
                      isolation={"precision": {"set_speedups": [speedup]}})


def test_the_lower_first_measurement_is_reported_whole() -> None:
    first, second = _measured(31.05, 29.0, 33.0, 0.0322), _measured(45.0, 37.14, 59.26, 0.0222)
    keep_the_lower(second, first)
    assert second.speedup == 31.05 and second.speedup_ci == (29.0, 33.0)
    assert second.candidate_timing.median_ms == 0.0322 and second.isolation["precision"]["set_speedups"] == [31.05]
    assert second.speedup_ci[0] <= second.speedup <= second.speedup_ci[1]
    assert any(f.check == "re-measured" for f in second.findings)


def test_the_lower_second_measurement_stands_as_it_is() -> None:
    first, second = _measured(45.0, 37.14, 59.26, 0.0222), _measured(31.05, 29.0, 33.0, 0.0322)
    keep_the_lower(second, first)
    assert second.speedup == 31.05 and second.speedup_ci == (29.0, 33.0) and not second.findings
