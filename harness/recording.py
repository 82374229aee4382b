"""`record`: the facts an evaluation gathered and the decision the gates made, written into its `Evaluation` (the
record the store, the judge model and the reports read). Decides nothing; what it writes and the order it writes
it in are what evaluations have always held, so a stored record reads the same."""

from __future__ import annotations

from harness.decision.facts import ChildFacts, Facts
from harness.decision.gates import Decision, child_ended, timing_samples
from harness.decision.timing_reading import timing_record
from harness.feedback.roofline import roofline
from harness.policy import EvalPolicy
from harness.records import Evaluation, Numerics
from kernelbench.problem import Problem

_CHILD_PHASES = ("import", "construct", "correctness", "timing", "calls")


def record(evaluation: Evaluation, facts: Facts, decision: Decision, problem: Problem, policy: EvalPolicy) -> None:
    """What was gathered (the processes, the builds, the phases' seconds), then what was decided and measured."""
    if facts.reference is not None:
        evaluation.isolation.setdefault("precision_settings", {})["reference"] = facts.reference.settings
    evaluation.phase_seconds.update(facts.seconds)
    if facts.child is not None:
        evaluation.build = {"builds": [{k: v for k, v in b.items() if k != "source_text"} for b in facts.builds]}
        _record_child(evaluation, facts.child)
        evaluation.isolation["scratch_quota_mb"] = policy.scratch_limit_mb if facts.scratch_quota else None
    evaluation.verdict, evaluation.findings = decision.verdict, decision.findings
    if facts.comparisons is not None and decision.decided_by is not child_ended:
        evaluation.trials = [c.trial for c in facts.comparisons]
    if facts.contract is not None:
        evaluation.numerics = Numerics.model_validate(facts.contract.model_dump())
    evaluation.deterministic = facts.deterministic
    if facts.census and facts.census["ops"]:
        evaluation.isolation["runtime_compute"] = {"ops": facts.census["ops"], "kernel_share": facts.kernel_share,
                                                   "calls": facts.census.get("calls", 1),
                                                   "work_share": facts.work_share}
    if facts.timed is not None:
        _record_timing(evaluation, facts, decision, problem)


def _record_child(evaluation: Evaluation, child: ChildFacts) -> None:
    """How the candidate's process ran: its resources, its phases' seconds, what its result file reported."""
    outcome, result = child.outcome, child.result
    evaluation.isolation.update({"peak_rss_mb": round(outcome.peak_rss_mb, 1), "child_wall_s": round(outcome.wall_s, 3),
                                 "returncode": outcome.returncode, "leftover_processes_killed": len(outcome.killed_pids),
                                 **outcome.containment})
    evaluation.phase_seconds["child"] = evaluation.phase_seconds.get("child", 0.0) + outcome.wall_s
    for earlier, later in zip(child.events, child.events[1:]):
        name = earlier.get("phase")
        if name in _CHILD_PHASES:
            evaluation.phase_seconds[name] = later["t"] - earlier["t"]
    if result:
        evaluation.device_info = result.device_info
        if result.telemetry:
            evaluation.device_info["nvml"] = result.telemetry
        evaluation.build["threads"] = result.threads
        evaluation.isolation.setdefault("precision_settings", {})["candidate"] = result.precision
        evaluation.build["kernel_calls"] = result.kernel_calls


def _record_timing(evaluation: Evaluation, facts: Facts, decision: Decision, problem: Problem) -> None:
    """The protocol and audits of a timed run, and the measurements the gates let through."""
    timed = facts.timed
    assert timed is not None
    evaluation.isolation["protocol"] = "parent-driven" if timed.parent_reads else "child-staged"
    audited = timed.audited
    evaluation.isolation["audits"] = {"knockouts": audited.knockouts, "knocked_out_right": audited.knocked_out_right,
                                      "kernel_share": facts.kernel_share}
    reading = facts.reading
    if reading is not None and decision.passed(timing_samples):
        evaluation.ref_timing, evaluation.candidate_timing = reading.ref_stats, reading.candidate_stats
        evaluation.speedup, evaluation.speedup_ci = reading.speedup, reading.interval
        evaluation.noise_floor, evaluation.speedup_significant = reading.noise_floor, reading.significant
        evaluation.isolation["precision"] = reading.precision
        evaluation.isolation["timing"] = timing_record(timed, reading)
    if evaluation.accepted:
        evaluation.roofline = roofline(problem, evaluation.device, evaluation.device_info, evaluation.ref_ms,
                                       evaluation.candidate_ms)
