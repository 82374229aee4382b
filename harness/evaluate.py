"""`evaluate()`: judge one candidate against one problem on one device. The parent decides everything."""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from pathlib import Path
from typing import Any, Callable

from harness import job as J
from harness.canaries import passing_canaries
from harness.compare import compare_trial
from harness.device import resolve_device
from harness.nvml import telemetry_flags
from harness.paths import build_cache_dir
from harness.policy import EvalPolicy
from harness.records import Evaluation, Verdict
from harness.reference import ReferenceRun, run_reference
from harness.roofline import roofline
from harness.sandbox import ChildOutcome, Limits, run_child
from harness.scratch import read_result, save_inputs, scratch_folder
from harness.source_scan import scan_built_sources
from harness.static_check import check_candidate
from harness.timing import speedup_interval, summarize
from harness.verdicts import child_failure, integrity_failures, read_events
from kernelbench.problem import Problem

Progress = Callable[[str], None]


def candidate_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _new_evaluation(problem: Problem, source: str, device: str, policy: EvalPolicy) -> Evaluation:
    return Evaluation(verdict=Verdict.REJECTED, problem_name=problem.name, problem_fingerprint=problem.fingerprint,
                      candidate_hash=candidate_hash(source), device=device, policy=policy.model_dump())


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
    evaluation.reasons.extend(static.notes)
    if static.verdict:
        evaluation.verdict = Verdict(static.verdict)
        evaluation.reasons = static.errors + evaluation.reasons
    else:
        _run_isolated(evaluation, problem, candidate_source, device, policy, say)
        if evaluation.accepted and _implausible(evaluation, policy):
            evaluation = _remeasure(evaluation, problem, candidate_source, device, policy, say)
            if evaluation.accepted and _beats_physics(evaluation):
                evaluation.reasons.insert(0, f"[physics] {evaluation.candidate_ms:.4f} ms is under half the "
                                          f"roofline floor ({evaluation.roofline['floor_ms']:.4f} ms) even when "
                                          "re-measured: check the device's peak rates or the kernel's timing")
    evaluation.phase_seconds["total"] = time.perf_counter() - started
    return evaluation


def _beats_physics(evaluation: Evaluation) -> bool:
    """Faster than half the roofline floor. Only on CUDA, where L2 is flushed before each timed call: on the CPU
    small problems run from cache, above the DRAM bandwidth the floor assumes."""
    return evaluation.device == "cuda" and evaluation.roofline.get("candidate_fraction", 0.0) > 2.0


def _implausible(evaluation: Evaluation, policy: EvalPolicy) -> bool:
    return (evaluation.speedup or 0.0) > policy.implausible_speedup or _beats_physics(evaluation)


def _remeasure(first: Evaluation, problem: Problem, source: str, device: str, policy: EvalPolicy,
               say: Progress) -> Evaluation:
    say(f"speedup {first.speedup:.1f}x is implausible: re-measuring in a fresh process")
    second = _new_evaluation(problem, source, device, policy)
    _run_isolated(second, problem, source, device, policy, say)
    second.reasons.append(f"[re-measured] first measurement {first.speedup:.2f}x was above "
                          f"{policy.implausible_speedup:g}x; this is a second, fresh-process measurement")
    if second.accepted and first.speedup and second.speedup:
        second.speedup = min(first.speedup, second.speedup)  # report the less flattering of the two
    for name, seconds in first.phase_seconds.items():
        second.phase_seconds[f"first_{name}"] = seconds
    return second


def _run_isolated(evaluation: Evaluation, problem: Problem, source: str, device: str, policy: EvalPolicy,
                  say: Progress) -> None:
    job = J.ChildJob(device=device, build_cache=str(build_cache_dir()), init_seed=secrets.randbits(31),
                     cpu_threads=policy.cpu_threads, warmup_calls=policy.warmup_calls,
                     min_timed_calls=policy.min_timed_calls, max_timed_calls=policy.max_timed_calls,
                     timing_budget_s=policy.timing_budget_s, skip_timing=policy.skip_timing,
                     cuda_arch=policy.cuda_arch, hardening=policy.hardening, timing_seed=secrets.randbits(31),
                     spot_checks=policy.spot_checks)
    with scratch_folder(problem, source, job) as scratch:
        reference = None
        if device != "cuda-compile-only":
            say("computing reference outputs")
            ref_started = time.perf_counter()
            seeds = [secrets.randbits(31) for _ in range(policy.trials)]
            reference = run_reference(problem, device, job.init_seed, seeds, policy.cpu_threads,
                                      vary_distributions=policy.hardening)
            save_inputs(scratch, reference)
            evaluation.reasons.extend(reference.notes)
            evaluation.phase_seconds["reference"] = time.perf_counter() - ref_started
        say("building and running the candidate in an isolated process")
        limits = Limits(timeout_s=policy.timeout_s, memory_mb=policy.memory_limit_mb,
                        address_space_limit=device == "cpu", cpu_threads=policy.cpu_threads)
        outcome = run_child(scratch, limits)
        _decide(evaluation, problem, scratch, outcome, reference, policy)


def _record_child(evaluation: Evaluation, scratch: Path, outcome: ChildOutcome,
                  result: J.ChildResult | None) -> list[dict[str, Any]]:
    events = read_events(scratch)
    start_netns = next((e.get("netns") for e in events if e.get("phase") == "start"), None)
    parent_netns = os.readlink("/proc/self/ns/net") if os.path.exists("/proc/self/ns/net") else None
    if start_netns and parent_netns and start_netns != parent_netns:
        network = "isolated (own network namespace)"
    else:
        network = "NOT isolated: creating a network namespace failed here (needs root or user namespaces)"
    evaluation.isolation = {"network": network, "peak_rss_mb": round(outcome.peak_rss_mb, 1),
                            "child_wall_s": round(outcome.wall_s, 3), "returncode": outcome.returncode,
                            "leftover_processes_killed": len(outcome.killed_pids), **outcome.containment}
    evaluation.phase_seconds["child"] = evaluation.phase_seconds.get("child", 0.0) + outcome.wall_s
    for earlier, later in zip(events, events[1:]):
        name = earlier.get("phase")
        if name in ("import", "construct", "correctness", "timing"):
            evaluation.phase_seconds[name] = later["t"] - earlier["t"]
    if result:
        evaluation.device_info = result.device_info
        if result.telemetry:
            evaluation.device_info["nvml"] = result.telemetry
            evaluation.reasons.extend(telemetry_flags(result.telemetry.get("before", {}),
                                                      result.telemetry.get("after", {})))
        evaluation.build = {"builds": [{k: v for k, v in b.items() if k != "source_text"} for b in result.builds],
                            "threads": result.threads}
    return events


def _decide(evaluation: Evaluation, problem: Problem, scratch: Path, outcome: ChildOutcome,
            reference: ReferenceRun | None, policy: EvalPolicy) -> None:
    result = read_result(scratch)
    events = _record_child(evaluation, scratch, outcome, result)
    failure = child_failure(outcome, result, events, scratch, policy)
    if failure:
        evaluation.verdict, reasons = failure
        evaluation.reasons = reasons + evaluation.reasons
        return
    assert result is not None
    if _rejected_after_build(evaluation, result, policy):
        return
    if result.status == "compiled":
        evaluation.verdict = Verdict.COMPILED
        evaluation.reasons.append("compile-only CUDA device: the kernel compiled; correctness and speed "
                                  "need a GPU")
        evaluation.reasons.extend(f"not checked: {b['skipped']}" for b in result.builds if b.get("skipped"))
        return
    assert reference is not None
    violations = integrity_failures(result, reference, policy)
    if violations:
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons[:0] = violations
        return
    _judge_outputs(evaluation, scratch, reference, policy)
    if evaluation.verdict is Verdict.ACCEPTED and not policy.skip_timing:
        _judge_spot_checks(evaluation, scratch, reference, policy)
    if evaluation.verdict is Verdict.ACCEPTED and not policy.skip_timing:
        _judge_timing(evaluation, result)
        evaluation.roofline = roofline(problem, evaluation.device, evaluation.device_info, evaluation.ref_ms,
                                       evaluation.candidate_ms)
    if policy.hardening:
        canary_started = time.perf_counter()
        evaluation.reasons.extend(f"[degenerate-problem] a '{name}' output passes every trial of this problem: "
                                  "correctness here says less than it should"
                                  for name in passing_canaries(reference, policy))
        evaluation.phase_seconds["canaries"] = time.perf_counter() - canary_started


def _rejected_after_build(evaluation: Evaluation, result: J.ChildResult, policy: EvalPolicy) -> bool:
    if policy.require_custom_kernel and not result.builds:
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons.insert(0, "[no-kernel] no custom kernel was built while importing the candidate")
        return True
    if policy.static_policy == "off":
        return False
    findings = scan_built_sources(result.builds, strict=policy.static_policy == "strict")
    fatal = [f.render() + " (in the sources actually compiled)" for f in findings if f.fatal]
    if fatal:
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons[:0] = fatal
        return True
    return False


def _load(path: Path) -> Any:
    import torch

    return torch.load(path, weights_only=True)


def _judge_outputs(evaluation: Evaluation, scratch: Path, reference: ReferenceRun, policy: EvalPolicy) -> None:
    try:
        outputs = _load(scratch / J.OUTPUTS_FILE)
    except Exception as exc:  # a missing or tampered file: the candidate's problem, never the caller's
        evaluation.verdict = Verdict.CRASH
        evaluation.reasons.insert(0, f"the candidate's outputs could not be read back: {type(exc).__name__}")
        return
    if not isinstance(outputs, list) or len(outputs) != len(reference.outputs):
        evaluation.verdict = Verdict.CRASH
        evaluation.reasons.insert(0, "the candidate's process returned outputs for the wrong number of trials")
        return
    failures = []
    for index, (seed, expected, got) in enumerate(zip(reference.trial_seeds, reference.outputs, outputs)):
        calls = got if isinstance(got, list) and got else [got]
        results = [compare_trial(seed, expected, call, policy) for call in calls]
        trial = next((r for r in results if not r.passed), results[0])
        trial.distribution = reference.distributions[index]
        evaluation.trials.append(trial)
        if not trial.passed:
            which = " (on the call after the reference ran)" if results[0].passed and len(results) > 1 else ""
            failures.append(f"[correctness] trial {index + 1} of {len(outputs)} ({trial.distribution} inputs)"
                            f"{which}: {trial.message}")
    evaluation.verdict = Verdict.INCORRECT if failures else Verdict.ACCEPTED
    evaluation.reasons[:0] = failures


def _judge_spot_checks(evaluation: Evaluation, scratch: Path, reference: ReferenceRun, policy: EvalPolicy) -> None:
    if not policy.hardening or not policy.spot_checks:
        return
    try:
        checks = _load(scratch / J.SPOT_CHECKS_FILE)
        assert isinstance(checks, list) and checks
    except Exception:
        evaluation.verdict = Verdict.CRASH
        evaluation.reasons.insert(0, "the outputs of timed calls could not be read back")
        return
    for check in checks:
        trial = int(check["trial"])
        result = compare_trial(reference.trial_seeds[trial], reference.outputs[trial], check["output"], policy)
        if not result.passed:
            evaluation.verdict = Verdict.INCORRECT
            evaluation.reasons.insert(0, f"[spot-check] timed call {check['call']} returned a wrong result while "
                                      f"correctness trials passed: {result.message}")
            return


def _judge_timing(evaluation: Evaluation, result: J.ChildResult) -> None:
    timing = result.timing or {}
    ref, candidate = timing.get("ref") or [], timing.get("candidate") or []
    if not ref or not candidate or len(ref) != len(candidate) or min(ref + candidate) <= 0:
        evaluation.verdict = Verdict.CRASH
        evaluation.reasons.insert(0, "the timing phase reported no valid samples")
        return
    evaluation.ref_timing = summarize(ref)
    evaluation.candidate_timing = summarize(candidate)
    evaluation.speedup = evaluation.ref_timing.median_ms / max(evaluation.candidate_timing.median_ms, 1e-9)
    evaluation.speedup_ci = speedup_interval(ref, candidate)
