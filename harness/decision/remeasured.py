"""After a re-measure (an implausible speedup timed again in fresh processes, harness/pipeline.py), the speedup, its
interval and the times all come from ONE measurement, the less flattering of the two: e19f4ec printed the lower
speedup with the other measurement's interval and times (31.05x with the interval [37.14-59.26])."""

from __future__ import annotations

import copy

from harness.records import Check, Evaluation, Finding

_MEASURED = ("speedup", "speedup_ci", "speedup_significant", "noise_floor", "ref_timing", "candidate_timing",
             "roofline")
_MEASURED_ISOLATION = ("precision", "timing")


def keep_the_lower(second: Evaluation, first: Evaluation) -> None:
    """`second` (the re-measure, whose checks decided) reports the measurement with the lower speedup, whole."""
    if not (second.accepted and first.speedup and second.speedup) or second.speedup <= first.speedup:
        return
    for name in _MEASURED:
        setattr(second, name, copy.deepcopy(getattr(first, name)))
    for key in _MEASURED_ISOLATION:
        if key in first.isolation:
            second.isolation[key] = copy.deepcopy(first.isolation[key])
    second.findings.append(Finding(Check.RE_MEASURED, f"the first measurement ({first.speedup:.2f}x) was the lower of the "
                                   "two: its speedup, interval and times are the ones reported", fatal=False))
