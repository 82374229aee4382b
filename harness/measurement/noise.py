"""The noise floor: how far two identical reference processes disagree (A/A), and what the machine says about
its own load while timing ran (runs in the parent).

A speedup is one pair of processes, in one memory layout, on one machine state; a rerun gets others. The A/A pair
measures that spread in the same run, on the same inputs and the same rotation, so the printed interval is widened
by it and a speedup counts only where the widened interval clears 1. The machine's own accounts (CPU pressure from
PSI, runnable tasks) say when the spread is the machine's, not the kernel's.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

from harness.records import Check, Finding

NOISY_AA = 0.05  # an A/A pair further apart than this makes the run too noisy to resolve small differences
NOISY_PRESSURE = 25.0  # percent of the last 10 s in which some runnable task waited for a CPU (PSI "some avg10")


@dataclass(frozen=True)
class Load:
    pressure: float | None  # PSI cpu "some avg10", percent; None where the kernel has no PSI
    runnable: int  # tasks runnable right now (the fourth field of /proc/loadavg, before the slash)
    cpus: int

    def as_dict(self) -> dict[str, float | int | None]:
        return {"cpu_pressure_pct": self.pressure, "runnable": self.runnable, "cpus": self.cpus}


def machine_load() -> Load:
    pressure = None
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        pressure = float(dict(part.split("=") for part in line.split()[1:])["avg10"])
    except (OSError, KeyError, ValueError, IndexError):
        pass
    try:
        runnable = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        runnable = 0
    return Load(pressure, runnable, os.cpu_count() or 1)


def spread(aa_interval: tuple[float, float]) -> float:
    """How far, in log terms, the A/A interval reaches from 1.0: the disagreement of two identical processes."""
    low, high = aa_interval
    return max(abs(math.log(max(low, 1e-12))), abs(math.log(max(high, 1e-12))))


def widened(interval: tuple[float, float], aa_interval: tuple[float, float]) -> tuple[float, float]:
    """The speedup's interval from one pair of processes, widened on each side by the A/A spread: the two sides
    are two processes too, so they may disagree as much as two copies of the reference do."""
    factor = math.exp(spread(aa_interval))
    return interval[0] / factor, interval[1] * factor


def significant(interval: tuple[float, float]) -> bool:
    """Whether an interval says the candidate differs from the reference at all (faster or slower)."""
    return interval[0] > 1.0 or interval[1] < 1.0


def noise_findings(aa_ratio: float, aa_interval: tuple[float, float],
                   loads: tuple[Load, Load] | None) -> list[Finding]:
    """A `[noise]` note where the A/A pair or the machine's own accounts make the interval untrustworthy."""
    reasons: list[Finding] = []
    far = spread(aa_interval)
    if far > math.log1p(NOISY_AA):
        reasons.append(Finding(
            Check.NOISE, f"two copies of the reference timed in the same rotation read {aa_ratio:.3f}x "
            f"[{aa_interval[0]:.3f}-{aa_interval[1]:.3f}]: this machine cannot resolve differences under "
            f"about {math.expm1(far):.0%} right now, and the speedup's interval is widened by that much"))
    pressures = [load.pressure for load in loads or () if load.pressure is not None]
    if pressures and max(pressures) > NOISY_PRESSURE:
        reasons.append(Finding(
            Check.NOISE, f"other tasks waited for a CPU {max(pressures):.0f}% of the time while this was timed "
            "(PSI cpu pressure): rerun on a quieter machine for a tighter interval"))
    return reasons


# Student's t, 97.5th percentile, by degrees of freedom (a two-sided 95% interval); past 10, 1.96 + 2.4/df is within
# 0.005 of the table
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def t975(df: int) -> float:
    return _T975.get(df, 1.96 + 2.4 / max(df, 1))


@dataclass(frozen=True)
class RerunSpread:
    """What several independent process sets say about a rerun (`rerun_interval`)."""

    speedup: float  # the median of the sets' speedups (of two, their geometric mean)
    interval: tuple[float, float]  # where a rerun's speedup lands 95% of the time, never tighter than `floor`
    between_sd: float | None  # one set's log-speedup spread from set to set; None with nothing to estimate it
    df: int  # its degrees of freedom: sets - 1, plus one per A/A ratio
    floored: bool  # the within-run interval (widened by the A/A floor) was the wider


def rerun_interval(speedups: list[float], aa_ratios: list[float],
                   floor: tuple[float, float]) -> RerunSpread:
    """A 95% interval for what a rerun prints, from `speedups`, one per independent set of processes (fresh
    reference, candidate and copy processes: a fresh placement, allocation and memory layout each), and
    `aa_ratios`, the A/A ratio (reference over its copy) of each set, whose truth is 1.0.

    Every set's log speedup is the truth plus what its processes add (layout, placement, cache and frequency state)
    plus its batches' noise; the sets' spread around their mean estimates that variance with sets - 1 degrees of
    freedom, and each A/A ratio, two processes of the same computation, adds one more (its mean is known: 0). Their
    pooled variance `v` gives a prediction interval for a rerun of as many sets: mean +- t(df) * sqrt(2 v / sets),
    the 2 because the printed value and the rerun each carry their own sets' noise (an interval for the truth,
    +- 1.96 sd, holds a rerun only 83% of the time). The result is never tighter than `floor`, the within-run
    interval widened by the A/A spread (harness/measurement/noise.py `widened`): identical sets leave that as it is.

    The speedup is the sets' median: on a shared machine one set in a few is hit by a burst of load (0.38x in one set
    of an A/A run whose other two read 0.99x); its spread widens the interval, its value does not drag the centre.
    Recomputed over the A/A runs of harness/decision/timing_reading.py, a rerun fell inside another run's interval
    120 times in 126 with the median, 118 with the geometric mean.
    """
    if not speedups:
        raise ValueError("a rerun interval needs at least one set")
    logs = [math.log(max(s, 1e-12)) for s in speedups]
    centre = sum(logs) / len(logs)
    aa = [math.log(max(a, 1e-12)) for a in aa_ratios]
    df = len(logs) - 1 + len(aa)
    speedup = math.exp(statistics.median(logs))  # one set hit by a burst of load moves the mean, not the median
    if df < 1 or len(logs) < 2:  # one set: nothing between sets to measure, the floor is all there is
        return RerunSpread(speedup, floor, None, df, True)
    variance = (sum((v - centre) ** 2 for v in logs) + sum(v * v for v in aa)) / df
    half = t975(df) * math.sqrt(2 * variance / len(logs))
    low, high = speedup * math.exp(-half), speedup * math.exp(half)
    floored = low >= floor[0] and high <= floor[1]
    return RerunSpread(speedup, (min(low, floor[0]), max(high, floor[1])), math.sqrt(variance), df, floored)



def disagreeing_sets(set_intervals: list[tuple[float, float]]) -> bool:
    """Whether two process sets' own intervals (each widened by its own A/A spread) do not overlap: their speedups
    differ by more than their own noise explains (a candidate whose processes run fast or 3x slow at random)."""
    return len(set_intervals) > 1 and max(low for low, _ in set_intervals) > min(high for _, high in set_intervals)


def covering(interval: tuple[float, float], set_intervals: list[tuple[float, float]]) -> tuple[float, float]:
    """`interval` widened to hold every set's own interval: a rerun's reading falls among them."""
    return min(interval[0], *(low for low, _ in set_intervals)), max(interval[1], *(high for _, high in set_intervals))
