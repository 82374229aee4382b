"""What a timed run says about speed: the samples believed, the speedup and its interval, widened by the A/A
noise floor where a copy of the reference was timed beside it and, where several independent process sets were
timed (`EvalPolicy.process_pairs`), by the spread between them, so that it holds what a rerun prints
(harness/measurement/noise.py `rerun_interval`). Pure arithmetic over a `TimedRun`.

Measured (A/A: each problem's own Model as the candidate, harness/measurement/self_check.py, so the truth is 1.0;
2 shared CPU cores under the load of several other sessions; hi/lo: the median interval's high over its low):
- bundled problems (ReLU, GELU, Softmax, LayerNorm, Scale_Tanh_Residual, MSELoss), 4 evaluations each: one set
  per evaluation, before the reference's processes held the candidate's outputs too: 1.0 inside 23 of 24 intervals, a
  rerun inside the first interval 17 of 18, inside any other run's 64 of 72; after, interleaved in one run: one set
  24/24, 18/18, 71/72 (hi/lo 1.14); two sets 24/24, 17/18, 70/72 (1.27); three sets 24/24, 18/18, 70/72 (1.28)
  with the sets' geometric mean as the speedup, 24/24, 16/18, 68/72 with their median;
- 9 real KernelBench problems (level 1 ReLU, GELU, Softmax, LayerNorm, Sum reduction, square matmul, conv 2D;
  level 2 Conv2D_ReLU_BiasAdd, Gemm_Multiply_LeakyReLU; shrunk to 16 MB and 3e8 FLOPs), 3 evaluations each,
  interleaved: one set left 1.0 out twice in 27 (Conv2D 0.977x [0.958-0.998], Sum reduction 1.036x [1.009-1.075]:
  a "speedup" fast_1 would count), a rerun inside the first interval 16/18, inside any other run's 48/54 (hi/lo
  1.08); three sets covered 1.0 27 times in 27, none significant, 17/18, 48/54 with the sets' geometric mean as the
  speedup and 52/54 with their median (hi/lo 1.20), which is what is printed (noise.py `rerun_interval`). The misses
  are runs in which one set was hit by a burst of load (one set 0.38x, the other two 0.99x).
Under this load the A/A floor already carries most of the spread; what three sets add is the steady bias of one
placement that the copy beside it does not share (the two one-set misses above).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.measurement.noise import (covering, disagreeing_sets, noise_findings, rerun_interval, significant, spread,
                                       widened)
from harness.measurement.timed_calls import TimedRun
from harness.measurement.timed_checks import PROBE_POSITIONS
from harness.measurement.timing import believed_samples, speedup_interval, summarize
from harness.policy import EvalPolicy
from harness.records import Check, Finding, TimingStats


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
    if len(timed.sets) > 1:
        _between_sets(reading, timed.sets)
    return reading


def _median_ratio(top: list[float], bottom: list[float]) -> float | None:
    return statistics.median(top) / max(statistics.median(bottom), 1e-9) if top and len(top) == len(bottom) else None


def _between_sets(reading: TimingReading, sets: list[TimedRun]) -> None:
    """The speedup and interval from the independent process sets: each set's own speedup (and A/A ratio), their
    median, and an interval for a rerun that is never tighter than the within-run one."""
    speedups, aa_ratios = [], []
    for one in sets:
        ref = one.ref_event_ms if reading.events else one.ref_ms
        speedup = _median_ratio(ref, one.candidate_event_ms if reading.events else one.candidate_ms)
        if speedup is None:
            return  # a set without samples of both sides: the within-run reading stands
        speedups.append(speedup)
        aa = _median_ratio(ref, one.copy_event_ms if reading.events else one.copy_ms)
        if aa is not None:
            aa_ratios.append(aa)
    rerun = rerun_interval(speedups, aa_ratios if len(aa_ratios) == len(sets) else [], reading.interval)
    within = reading.within_run
    reading.speedup, reading.interval = rerun.speedup, rerun.interval
    own = _set_intervals(sets, reading.events)
    if disagreeing_sets(own):  # the sets' spread is the candidate's, not the noise's: a rerun lands anywhere among them
        reading.interval = covering(reading.interval, own)
        reading.noise.append(Finding(Check.NOISE, "the process sets disagree beyond their own noise ("
                                     + ", ".join(f"{s:.2f}x [{lo:.2f}-{hi:.2f}]" for s, (lo, hi) in zip(speedups, own))
                                     + f"): the interval is widened to hold every set's, "
                                     f"[{reading.interval[0]:.2f}-{reading.interval[1]:.2f}], so a rerun is covered"))
    reading.precision.update({
        "process_sets": len(sets), "sets_disagree": disagreeing_sets(own), "set_speedups": [round(v, 4) for v in speedups],
        "set_aa_ratios": [round(v, 4) for v in aa_ratios], "pids": [list(one.pids) for one in sets],
        "within_run_spread": round(math.sqrt(within[1] / max(within[0], 1e-12)) - 1, 4),
        "between_set_spread": None if rerun.between_sd is None else round(math.expm1(rerun.between_sd), 4),
        "rerun_ci": [round(v, 4) for v in rerun.interval], "rerun_df": rerun.df,
        "floored_by_within_run": rerun.floored})


def _set_intervals(sets: list[TimedRun], events: bool) -> list[tuple[float, float]]:
    """Each set's own interval (its batches' bootstrap), widened by its own A/A spread where its copy ran."""
    intervals = []
    for one in sets:
        ref = one.ref_event_ms if events else one.ref_ms
        candidate = one.candidate_event_ms if events else one.candidate_ms
        copy = one.copy_event_ms if events else one.copy_ms
        own = speedup_interval(ref, candidate)
        intervals.append(widened(own, speedup_interval(ref, copy)) if copy and len(copy) == len(ref) else own)
    return intervals


def catch_probability(checked_calls: int) -> float:
    """The chance that a kernel wrong on 1% of calls is caught among `checked_calls` checked calls."""
    return 1 - 0.99 ** checked_calls


def checks_note(timed: TimedRun, policy: EvalPolicy) -> Finding | None:
    if not policy.hardening or timed.checked_calls >= policy.timed_checks:
        return None
    return Finding(
        Check.CHECKS, f"only {timed.checked_calls} timed calls were checked, under the {policy.timed_checks} "
        f"the policy asks for (they did not fit in 5x the timing budget): a kernel wrong on 1% of calls "
        f"would be caught with probability {catch_probability(timed.checked_calls):.2f}, not "
        f"{catch_probability(policy.timed_checks):.2f}; raise --timing-budget (now {policy.timing_budget_s:g} s) "
        f"for more", fatal=False)


def timing_record(timed: TimedRun, reading: TimingReading) -> dict[str, Any]:
    """How the run was timed, for `Evaluation.isolation["timing"]`."""
    return {
        "clock": "CUDA events per call, backed by the parent's clock" if reading.events else
                 "parent perf_counter_ns around each batch; reference in its own process",
        "clock_speedup": round(statistics.median(timed.ref_ms) / max(statistics.median(timed.candidate_ms), 1e-9), 4),
        "parent_reads": timed.parent_reads,  # inputs written and outputs read by the parent, children frozen
        "batch_size": timed.batch_size, "batches": len(reading.ref), "calls_per_model": timed.total_calls,
        "process_sets": max(len(timed.sets), 1),
        "pipe_overhead_ms": round(timed.overhead_ms, 4), "timed_outputs_checked": timed.checked_calls,
        "positions_per_check": PROBE_POSITIONS, "timed_outputs_compared_in_full": timed.full_checks,
        "p_catch_1pct_cache_hits": round(catch_probability(timed.checked_calls), 3),
        "pilot_batches": timed.pilot_batches,
        "pilot_half_width": None if timed.pilot_half_width is None else round(timed.pilot_half_width, 4),
        "builds_frozen_while_timed": timed.frozen_builds, "held_output_checks": timed.held_checks,
        "load": {"before": timed.load[0].as_dict(), "after": timed.load[1].as_dict()} if timed.load else None}
