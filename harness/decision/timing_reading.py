"""What a timed run says about speed: the samples believed, the speedup and its interval, widened by the A/A
noise floor where a copy of the reference was timed beside it. Pure arithmetic over a `TimedRun`."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.measurement.noise import noise_findings, significant, spread, widened
from harness.measurement.timed_calls import TimedRun
from harness.measurement.timed_checks import PROBE_POSITIONS
from harness.measurement.timing import believed_samples, speedup_interval, summarize
from harness.policy import EvalPolicy
from harness.records import Finding, TimingStats


@dataclass
class TimingReading:
    ref: list[float]
    candidate: list[float]
    events: bool  # the samples are CUDA events (backed by the parent's clock), not the clock itself
    doubt: Finding | None
    speedup: float
    interval: tuple[float, float]  # widened by the A/A spread where the copy ran
    within_run: tuple[float, float]
    noise_floor: tuple[float, float] | None = None
    noise: list[Finding] = field(default_factory=list)
    precision: dict[str, Any] = field(default_factory=dict)

    @property
    def ref_stats(self) -> TimingStats:
        return summarize(self.ref)

    @property
    def candidate_stats(self) -> TimingStats:
        return summarize(self.candidate)

    @property
    def significant(self) -> bool:
        return significant(self.interval)


def read_timing(timed: TimedRun) -> TimingReading | None:
    """None when the run has no valid samples."""
    if not timed.ref_ms or len(timed.ref_ms) != len(timed.candidate_ms):
        return None
    ref, candidate, doubt = believed_samples(timed.ref_ms, timed.candidate_ms, timed.ref_event_ms,
                                             timed.candidate_event_ms)
    events = ref is timed.ref_event_ms
    speedup = summarize(ref).median_ms / max(summarize(candidate).median_ms, 1e-9)
    within = speedup_interval(ref, candidate)
    reading = TimingReading(ref, candidate, events, doubt, speedup, within, within)
    reading.precision = {"within_run_ci": [round(v, 4) for v in within]}
    copy = timed.copy_event_ms if events else timed.copy_ms
    if copy and len(copy) == len(ref):
        aa_ratio = statistics.median(ref) / max(statistics.median(copy), 1e-9)
        aa = speedup_interval(ref, copy)
        reading.noise_floor, reading.interval = aa, widened(within, aa)
        reading.precision.update({"aa_ratio": round(aa_ratio, 4), "aa_ci": [round(v, 4) for v in aa],
                                  "between_process_spread": round(math.expm1(spread(aa)), 4)})
        reading.noise = noise_findings(aa_ratio, aa, timed.load)
    return reading


def catch_probability(checked_calls: int) -> float:
    """The chance that a kernel wrong on 1% of calls is caught among `checked_calls` checked calls."""
    return 1 - 0.99 ** checked_calls


def checks_note(timed: TimedRun, policy: EvalPolicy) -> Finding | None:
    if not policy.hardening or timed.checked_calls >= policy.timed_checks:
        return None
    return Finding("checks", f"only {timed.checked_calls} timed calls were checked, under the {policy.timed_checks} "
                   f"the policy asks for (they did not fit in 5x the timing budget): a kernel wrong on 1% of calls "
                   f"would be caught with probability {catch_probability(timed.checked_calls):.2f}, not "
                   f"{catch_probability(policy.timed_checks):.2f}; raise timing_budget_s for more", fatal=False)


def timing_record(timed: TimedRun, reading: TimingReading) -> dict[str, Any]:
    """How the run was timed, for `Evaluation.isolation["timing"]`."""
    return {
        "clock": "CUDA events per call, backed by the parent's clock" if reading.events else
                 "parent perf_counter_ns around each batch; reference in its own process",
        "clock_speedup": round(statistics.median(timed.ref_ms) / max(statistics.median(timed.candidate_ms), 1e-9), 4),
        "parent_reads": timed.parent_reads,  # inputs written and outputs read by the parent, children frozen
        "batch_size": timed.batch_size, "batches": len(reading.ref), "calls_per_model": timed.total_calls,
        "pipe_overhead_ms": round(timed.overhead_ms, 4), "timed_outputs_checked": timed.checked_calls,
        "positions_per_check": PROBE_POSITIONS, "timed_outputs_compared_in_full": timed.full_checks,
        "p_catch_1pct_cache_hits": round(catch_probability(timed.checked_calls), 3),
        "pilot_batches": timed.pilot_batches,
        "pilot_half_width": None if timed.pilot_half_width is None else round(timed.pilot_half_width, 4),
        "builds_frozen_while_timed": timed.frozen_builds, "held_output_checks": timed.held_checks,
        "load": {"before": timed.load[0].as_dict(), "after": timed.load[1].as_dict()} if timed.load else None}
