"""`evaluate()`: judge one candidate against one problem on one device. The parent decides everything.

Four steps: the static check of the source; gathering (harness/gathering/: the reference, the candidate's process,
its trials, the audits and the timed calls, handed back as one immutable `Facts`); the decision
(harness/decision/gates.py: the gates in the registry's order); the record (harness/recording.py: the `Evaluation`
the store, the judge and the reports read). A speedup too good to believe is measured again, the same four steps
in fresh processes."""

from __future__ import annotations

import hashlib
import time

from harness.decision.facts import Facts
from harness.decision.gates import decide
from harness.decision.remeasured import keep_the_lower
from harness.decision.version import checks_version
from harness.device import resolve_device
from harness.gathering.conversation import Progress
from harness.gathering.gather import gather
from harness.policy import EvalPolicy
from harness.recording import record
from harness.records import Check, Evaluation, Finding, Verdict, rendered
from harness.verification.static_check import check_candidate
from kernelbench.problem import Problem

__all__ = ["Progress", "candidate_hash", "evaluate"]


def candidate_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def evaluate(problem: Problem, candidate_source: str, device: str = "cpu", policy: EvalPolicy | None = None,
             progress: Progress | None = None) -> Evaluation:
    """Judge `candidate_source` (a KernelBench `ModelNew` file) against `problem` on `device`.

    Raises ProblemError when the *problem* is broken and DeviceError when the device cannot be used; every
    failure of the candidate is a verdict. A speedup above `policy.implausible_speedup` is believed only after
    a second evaluation in a fresh process, with fresh seeds, confirms it.
    """
    policy = policy or EvalPolicy()
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    device = resolve_device(device)
    evaluation = _new_evaluation(problem, candidate_source, device, policy)
    static = check_candidate(candidate_source, policy)
    evaluation.phase_seconds["static"] = time.perf_counter() - started
    facts = _static_facts(device, static.verdict, static.findings)
    if static.verdict is None:
        facts = gather(problem, candidate_source, policy, facts, say)
    record(evaluation, facts, decide(facts, policy, notes=facts.notes), problem, policy)
    if evaluation.accepted and policy.tier == "full" and _implausible(evaluation, policy):
        evaluation = _remeasure(evaluation, facts, problem, candidate_source, policy, say)
        if evaluation.accepted and _beats_physics(evaluation):
            evaluation.findings.append(Finding(
                Check.PHYSICS, f"{evaluation.candidate_ms:.4f} ms is under half the roofline floor "
                f"({evaluation.roofline['floor_ms']:.4f} ms) even when re-measured: check the device's peak rates or "
                "the kernel's timing", fatal=False, lead=True))
    evaluation.reasons = rendered(evaluation.findings)
    evaluation.phase_seconds["total"] = time.perf_counter() - started
    return evaluation


def _new_evaluation(problem: Problem, source: str, device: str, policy: EvalPolicy) -> Evaluation:
    return Evaluation(verdict=Verdict.REJECTED, tier=policy.tier, problem_name=problem.name,
                      problem_fingerprint=problem.fingerprint, candidate_hash=candidate_hash(source), device=device,
                      policy=policy.model_dump(), checks_version=checks_version(policy))


def _static_facts(device: str, verdict: Verdict | None, findings: list[Finding]) -> Facts:
    return Facts(device, static_verdict=verdict, static_findings=findings, notes=[f for f in findings if not f.fatal])


def _beats_physics(evaluation: Evaluation) -> bool:
    """Faster than half the roofline floor. Only on CUDA, where L2 is flushed before each timed call: on the CPU
    small problems run from cache, above the DRAM bandwidth the floor assumes."""
    return evaluation.device == "cuda" and evaluation.roofline.get("candidate_fraction", 0.0) > 2.0


def _implausible(evaluation: Evaluation, policy: EvalPolicy) -> bool:
    return (evaluation.speedup or 0.0) > policy.implausible_speedup or _beats_physics(evaluation)


def _remeasure(first: Evaluation, first_facts: Facts, problem: Problem, source: str, policy: EvalPolicy,
               say: Progress) -> Evaluation:
    say(f"speedup {first.speedup:.1f}x is implausible: re-measuring in a fresh process")
    second = _new_evaluation(problem, source, first.device, policy)
    facts = gather(problem, source, policy, _static_facts(first.device, None, first_facts.static_findings), say)
    record(second, facts, decide(facts, policy, notes=facts.notes), problem, policy)
    second.findings.append(Finding(Check.RE_MEASURED, f"first measurement {first.speedup:.2f}x was above "
                                   f"{policy.implausible_speedup:g}x; this is a second, fresh-process measurement",
                                   fatal=False))
    keep_the_lower(second, first)  # the less flattering measurement, speedup, interval and times together
    for name, seconds in first.phase_seconds.items():
        second.phase_seconds[f"first_{name}"] = seconds
    return second
