"""What an evaluation found out, gathered in one record before anything is decided (harness/decision/gates.py
decides). Every field is something the parent observed or computed; None means it was not gathered (the
conversation stopped before it, or the policy does not ask for it). Immutable: harness/gathering/ hands it back
complete (each step of the conversation returns a new one), and nothing after it changes what was found."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.child.job import ChildResult
from harness.isolation.protocol import Failed
from harness.isolation.sandbox import ChildOutcome
from harness.measurement.frozen_trials import CheckedTrials
from harness.decision.timing_reading import TimingReading, read_timing
from harness.measurement.timed_calls import TimedRun
from harness.records import Finding, TrialResult, Verdict
from harness.verification.oracle import NumericalContract
from harness.verification.reference import ReferenceRun
from harness.verification.work_share import work_share


@dataclass(frozen=True)
class Comparison:
    """One correctness trial compared: the worst of its calls, and whether that was a repeated call."""

    trial: TrialResult
    repeated: bool = False


@dataclass(frozen=True)
class ChildFacts:
    """How the candidate's process ended and what it reported (its report is validated, never believed)."""

    outcome: ChildOutcome
    result: ChildResult | None
    events: list[dict[str, Any]]
    log_tail: str
    stopped: str | None = None  # the parent stopped the conversation (the child died, timed out, broke the channel)
    failure: Failed | None = None  # the child's own failure report
    phase: str | None = None  # what the parent was driving when it ended ("correctness")


@dataclass(frozen=True)
class Facts:
    device: str
    static_verdict: Verdict | None = None  # the static policy's verdict: the candidate never ran
    notes: list[Finding] = field(default_factory=list)  # gathered on the way: static, reference, telemetry
    static_findings: list[Finding] = field(default_factory=list)
    limit: Finding | None = None  # a build or scratch limit the child hit: why, whatever it made of it
    builds: list[dict[str, Any]] = field(default_factory=list)
    child: ChildFacts | None = None
    reference: ReferenceRun | None = None
    unreadable: str | None = None  # the candidate's saved outputs could not be read back (the exception's name)
    protocol_broken: str | None = None  # the candidate's process broke the call protocol during the trials
    outputs_count: int | None = None  # how many trials the candidate's outputs covered
    comparisons: list[Comparison] | None = None
    checked: CheckedTrials | None = None  # the parent-driven trials (calls, kernel calls, their own findings)
    contract: NumericalContract | None = None  # both sides' error against a float64 run of the reference
    deterministic: bool | None = None  # the trial called twice on the same inputs gave the same bits
    knockout_matched: bool | None = None  # forward, every kernel function poisoned, still gave the right answer
    census: dict[str, Any] | None = None  # PyTorch compute forward ran, outside the kernels or in them (child/census.py)
    reference_flops: float | None = None  # one forward of the reference's work (verification/work_share.py)
    degenerate: list[str] | None = None  # the canaries that pass every trial
    canary_notes: list[Finding] = field(default_factory=list)  # what the canaries could not check
    timed: TimedRun | None = None
    processes: tuple[int, int] | None = None  # the candidate's cgroup's processes after it loaded, and at the end
    scratch_quota: bool = False  # the candidate's scratch folder had a quota of its own (the kernel's, not ours)
    seconds: dict[str, float] = field(default_factory=dict)  # how long the parent's phases took (reference, ...)

    @cached_property
    def reading(self) -> TimingReading | None:
        """What the timed run says about speed (bootstraps: computed once, when first read after timing); None
        without a run, with failures, or without valid samples."""
        return read_timing(self.timed) if self.timed is not None and not self.timed.failures else None

    @property
    def kernel_share(self) -> float | None:
        """The candidate's kernels' share of forward's time: clocked over an audit batch among the timed calls
        (CPU), else the census call's own reading (nothing timed), else None (CUDA)."""
        if self.timed is not None and self.timed.audited.own_share is not None:
            return self.timed.audited.own_share
        return (self.census or {}).get("share")

    @property
    def work_share(self) -> float | None:
        """The kernels' share of the work: what the library's counted FLOPs left undone of the reference's."""
        return work_share(self.census, self.reference_flops)

    @property
    def result(self) -> ChildResult | None:
        return self.child.result if self.child else None
