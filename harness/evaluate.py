"""`evaluate()`: judge one candidate against one problem on one device. The parent decides everything."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from harness import job as J
from harness.compare import compare_trial
from harness.device import resolve_device
from harness.paths import build_cache_dir, scratch_root
from harness.policy import EvalPolicy
from harness.records import Evaluation, Verdict
from harness.reference import ReferenceRun, run_reference
from harness.sandbox import ChildOutcome, Limits, run_child
from harness.static_check import check_candidate
from harness.timing import speedup_interval, summarize
from harness.verdicts import child_failure, read_events
from kernelbench.problem import Problem

Progress = Callable[[str], None]


def candidate_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _seeds(count: int) -> tuple[int, list[int]]:
    """A fresh secret init seed and trial seeds per evaluation: no candidate can precompute its outputs."""
    return secrets.randbits(31), [secrets.randbits(31) for _ in range(count)]


def _prepare_scratch(problem: Problem, source: str, job: J.ChildJob) -> Path:
    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(os.path.realpath(root)) / f"eval-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
    scratch.mkdir()
    (scratch / J.CANDIDATE_FILE).write_text(source)
    (scratch / J.PROBLEM_FILE).write_text(problem.source)
    (scratch / J.JOB_FILE).write_text(job.model_dump_json())
    return scratch


def _save_inputs(scratch: Path, reference: ReferenceRun) -> None:
    import torch

    torch.save({"init_inputs": reference.init_inputs,
                "trials": [{"seed": s, "inputs": i} for s, i in zip(reference.trial_seeds, reference.trial_inputs)]},
               scratch / J.INPUTS_FILE)


def _read_result(scratch: Path) -> J.ChildResult | None:
    try:
        return J.ChildResult.model_validate_json((scratch / J.RESULT_FILE).read_text())
    except (OSError, ValueError):  # missing (the child died) or malformed: never trusted
        return None


def evaluate(problem: Problem, candidate_source: str, device: str = "cpu", policy: EvalPolicy | None = None,
             progress: Progress | None = None) -> Evaluation:
    """Judge `candidate_source` (a KernelBench `ModelNew` file) against `problem` on `device`.

    Raises ProblemError when the *problem* is broken and DeviceError when the device cannot be used; every
    failure of the candidate is a verdict.
    """
    policy = policy or EvalPolicy()
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    device = resolve_device(device)
    evaluation = Evaluation(verdict=Verdict.REJECTED, problem_name=problem.name,
                            problem_fingerprint=problem.fingerprint, candidate_hash=candidate_hash(candidate_source),
                            device=device, policy=policy.model_dump())
    static = check_candidate(candidate_source, policy)
    evaluation.reasons.extend(static.notes)
    if static.verdict:
        evaluation.verdict = Verdict(static.verdict)
        evaluation.reasons = static.errors + evaluation.reasons
        evaluation.phase_seconds["total"] = time.perf_counter() - started
        return evaluation
    init_seed, trial_seeds = _seeds(policy.trials)
    job = J.ChildJob(device=device, build_cache=str(build_cache_dir()), init_seed=init_seed,
                     cpu_threads=policy.cpu_threads, warmup_calls=policy.warmup_calls,
                     min_timed_calls=policy.min_timed_calls, max_timed_calls=policy.max_timed_calls,
                     timing_budget_s=policy.timing_budget_s, skip_timing=policy.skip_timing,
                     cuda_arch=policy.cuda_arch)
    scratch = _prepare_scratch(problem, candidate_source, job)
    try:
        reference = None
        if device != "cuda-compile-only":
            say("computing reference outputs")
            ref_started = time.perf_counter()
            reference = run_reference(problem, device, init_seed, trial_seeds, policy.cpu_threads)
            _save_inputs(scratch, reference)
            evaluation.phase_seconds["reference"] = time.perf_counter() - ref_started
        say("building and running the candidate in an isolated process")
        limits = Limits(timeout_s=policy.timeout_s, memory_mb=policy.memory_limit_mb,
                        address_space_limit=device == "cpu", cpu_threads=policy.cpu_threads)
        outcome = run_child(scratch, limits)
        _decide(evaluation, scratch, outcome, reference, policy)
    finally:
        if os.environ.get("KERNELWRIGHT_KEEP_SCRATCH") != "1":
            shutil.rmtree(scratch, ignore_errors=True)
    evaluation.phase_seconds["total"] = time.perf_counter() - started
    return evaluation


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
                            "leftover_processes_killed": max(0, len(outcome.killed_pids))}
    evaluation.phase_seconds["child"] = outcome.wall_s
    for earlier, later in zip(events, events[1:]):
        name = earlier.get("phase")
        if name in ("import", "construct", "correctness", "timing"):
            evaluation.phase_seconds[name] = later["t"] - earlier["t"]
    if result:
        evaluation.device_info = result.device_info
        evaluation.build = {"builds": result.builds}
    return events


def _decide(evaluation: Evaluation, scratch: Path, outcome: ChildOutcome, reference: ReferenceRun | None,
            policy: EvalPolicy) -> None:
    result = _read_result(scratch)
    events = _record_child(evaluation, scratch, outcome, result)
    failure = child_failure(outcome, result, events, scratch, policy)
    if failure:
        evaluation.verdict, reasons = failure
        evaluation.reasons = reasons + evaluation.reasons
        return
    assert result is not None
    if result.status == "compiled":
        evaluation.verdict = Verdict.COMPILED
        evaluation.reasons.append("compile-only CUDA device: the kernel compiled; correctness and speed "
                                  "need a GPU")
        evaluation.reasons.extend(f"not checked: {b['skipped']}" for b in result.builds if b.get("skipped"))
        return
    if policy.require_custom_kernel and not result.builds:
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons.insert(0, "no custom kernel was built while importing the candidate")
        return
    assert reference is not None
    _judge_outputs(evaluation, scratch, reference, policy)
    if evaluation.verdict is Verdict.INCORRECT or policy.skip_timing:
        return
    _judge_timing(evaluation, result)


def _judge_outputs(evaluation: Evaluation, scratch: Path, reference: ReferenceRun, policy: EvalPolicy) -> None:
    import torch

    try:
        outputs = torch.load(scratch / J.OUTPUTS_FILE, weights_only=True)
    except Exception as exc:  # a missing or tampered file: the candidate's problem, never the caller's
        evaluation.verdict = Verdict.CRASH
        evaluation.reasons.insert(0, f"the candidate's outputs could not be read back: {type(exc).__name__}")
        return
    if not isinstance(outputs, list):
        outputs = []
    for seed, expected, got in zip(reference.trial_seeds, reference.outputs, outputs):
        evaluation.trials.append(compare_trial(seed, expected, got, policy))
    failed = [t for t in evaluation.trials if not t.passed]
    if failed or len(outputs) != len(reference.outputs):
        evaluation.verdict = Verdict.INCORRECT
        evaluation.reasons[:0] = [f"trial {evaluation.trials.index(t) + 1} of {len(evaluation.trials)}: {t.message}"
                                  for t in failed] or ["the candidate returned no outputs for some trials"]
    else:
        evaluation.verdict = Verdict.ACCEPTED


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
