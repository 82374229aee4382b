"""`evaluate()`: judge one candidate against one problem on one device. The parent decides everything.

The pipeline gathers what happened into `Facts` (harness/decision/facts.py): the static report, the reference,
the candidate's process, its trials, the knock-out, the census, the canaries and the timed calls; the gates in
harness/decision/gates.py decide the verdict from them. The conversation with the child asks the correctness
gates whether to go on, so nothing is timed that is already decided."""

from __future__ import annotations

import hashlib
import random
import secrets
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

from harness.child import job as J
from harness.child.child_run import build_service, forkable, limits_for
from harness.child.scratch import read_result, save_inputs, scratch_folder, scratch_full
from harness.child.verdicts import integrity_failures, log_tail, read_events
from harness.decision.facts import ChildFacts, Comparison, Facts
from harness.decision.gates import CORRECTNESS, child_ended, decide, timing_samples
from harness.decision.remeasured import keep_the_lower
from harness.decision.timing_reading import timing_record
from harness.decision.version import checks_version
from harness.defences import is_off
from harness.device import resolve_device
from harness.feedback.nvml import telemetry_flags
from harness.feedback.roofline import roofline
from harness.isolation import protocol as P
from harness.isolation.sandbox import ChildOutcome
from harness.isolation.scratch_quota import is_quota
from harness.isolation.session import ChildSession, ChildStopped
from harness.isolation.timing_slot import checking_slot
from harness.measurement.frozen_calls import FrozenSide, SideFailure, output_bound, parent_driven, slot_count
from harness.measurement.frozen_trials import run_trials
from harness.measurement.timed_calls import ChildFailed, TimedRun, census_flops, combined
from harness.paired_timing import parent_calls, reference_session, set_policy, shared_slots, time_both
from harness.policy import EvalPolicy
from harness.records import Check, Evaluation, Finding, Verdict, rendered
from harness.verification.canaries import passing_canaries
from harness.verification.compare import compare_trial
from harness.verification.oracle import deterministic, numerical_contract
from harness.verification.reference import ReferenceRun, run_reference
from harness.verification.static_check import check_candidate
from harness.verification.work_share import reference_flops
from kernelbench.problem import Problem

Progress = Callable[[str], None]
_BACKGROUND = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kernelwright-canaries")  # one per evaluation


def candidate_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _new_evaluation(problem: Problem, source: str, device: str, policy: EvalPolicy) -> Evaluation:
    return Evaluation(verdict=Verdict.REJECTED, tier=policy.tier, problem_name=problem.name,
                      problem_fingerprint=problem.fingerprint, candidate_hash=candidate_hash(source), device=device,
                      policy=policy.model_dump(), checks_version=checks_version(policy))


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
        _run_isolated(evaluation, facts, problem, candidate_source, policy, say)
    _conclude(evaluation, facts, problem, policy)
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
    facts = _static_facts(first.device, None, first_facts.static_findings)
    _run_isolated(second, facts, problem, source, policy, say)
    _conclude(second, facts, problem, policy)
    second.findings.append(Finding(Check.RE_MEASURED, f"first measurement {first.speedup:.2f}x was above "
                                   f"{policy.implausible_speedup:g}x; this is a second, fresh-process measurement",
                                   fatal=False))
    keep_the_lower(second, first)  # the less flattering measurement, speedup, interval and times together
    for name, seconds in first.phase_seconds.items():
        second.phase_seconds[f"first_{name}"] = seconds
    return second


def _conclude(evaluation: Evaluation, facts: Facts, problem: Problem, policy: EvalPolicy) -> None:
    """The gates decide; the measurements they let through are recorded."""
    if facts.census and facts.census.get("flops"):
        facts.reference_flops = reference_flops(problem)
    decision = decide(facts, policy, notes=facts.notes)
    evaluation.verdict, evaluation.findings = decision.verdict, decision.findings
    if facts.comparisons is not None and decision.decided_by is not child_ended:
        evaluation.trials = [c.trial for c in facts.comparisons]
    if facts.contract is not None:
        evaluation.numerics = facts.contract.model_dump()
    evaluation.deterministic = facts.deterministic
    share = facts.kernel_share
    if facts.census and facts.census["ops"]:
        evaluation.isolation["runtime_compute"] = {"ops": facts.census["ops"], "kernel_share": share,
                                                   "calls": facts.census.get("calls", 1),
                                                   "work_share": facts.work_share}
    if facts.timed is None:
        return
    evaluation.isolation["protocol"] = "parent-driven" if facts.timed.parent_reads else "child-staged"
    evaluation.isolation["audits"] = {"knockouts": facts.timed.knockouts,
                                      "knocked_out_right": facts.timed.knocked_out_right, "kernel_share": share}
    reading = facts.reading
    if reading is not None and decision.passed(timing_samples):
        evaluation.ref_timing, evaluation.candidate_timing = reading.ref_stats, reading.candidate_stats
        evaluation.speedup, evaluation.speedup_ci = reading.speedup, reading.interval
        evaluation.noise_floor, evaluation.speedup_significant = reading.noise_floor, reading.significant
        evaluation.isolation["precision"] = reading.precision
        evaluation.isolation["timing"] = timing_record(facts.timed, reading)
    if evaluation.accepted:
        evaluation.roofline = roofline(problem, evaluation.device, evaluation.device_info, evaluation.ref_ms,
                                       evaluation.candidate_ms)


def _record_child(evaluation: Evaluation, scratch: Path, outcome: ChildOutcome,
                  result: J.ChildResult | None) -> list[dict[str, Any]]:
    events = read_events(scratch)
    evaluation.isolation.update({"peak_rss_mb": round(outcome.peak_rss_mb, 1), "child_wall_s": round(outcome.wall_s, 3),
                                 "returncode": outcome.returncode, "leftover_processes_killed": len(outcome.killed_pids),
                                 **outcome.containment})
    evaluation.phase_seconds["child"] = evaluation.phase_seconds.get("child", 0.0) + outcome.wall_s
    for earlier, later in zip(events, events[1:]):
        name = earlier.get("phase")
        if name in ("import", "construct", "correctness", "timing", "calls"):
            evaluation.phase_seconds[name] = later["t"] - earlier["t"]
    if result:
        evaluation.device_info = result.device_info
        if result.telemetry:
            evaluation.device_info["nvml"] = result.telemetry
        evaluation.build["threads"] = result.threads
        evaluation.isolation.setdefault("precision_settings", {})["candidate"] = result.precision
        evaluation.build["kernel_calls"] = result.kernel_calls
    return events


class _Run:
    """The conversation's own state: the other processes, the slots, where the parent is driving."""

    def __init__(self) -> None:
        self.canaries: Future[list[str]] | None = None
        self.ref_session: ChildSession | None = None
        self.ref_copy: ChildSession | None = None  # a second reference process: the A/A noise floor
        self.checked_side: FrozenSide | None = None  # the candidate's slots, where the parent drove the trials
        self.phase: str | None = None  # "correctness" while the parent drives the trials
        self.failure: dict[str, Any] | None = None  # the child's own failure report
        self.stopped: str | None = None
        self.more_sets: Callable[[ExitStack], _ProcessSet] | None = None  # starts another set of timed processes
        self.knockout_call = False  # the knock-out ran as a call of its own (nothing timed): its output is a file

    def check_canaries(self, reference: ReferenceRun, policy: EvalPolicy, notes: list[Finding]) -> None:
        """In the background, while the candidate's process starts and runs (the parent only waits then)."""
        self.canaries = _BACKGROUND.submit(passing_canaries, reference, policy, notes)

    def degenerate(self) -> list[str] | None:
        """The canaries that pass every trial (waits for their check); None where they were not checked."""
        return self.canaries.result() if self.canaries is not None else None


def _run_isolated(evaluation: Evaluation, facts: Facts, problem: Problem, source: str, policy: EvalPolicy,
                  say: Progress) -> None:
    device = facts.device
    job = J.ChildJob(mode="evaluate", device=device, policy=policy,  # a pool seed only where the children stage
                     pool_seed=None if parent_driven(device) else secrets.randbits(31))
    builds = build_service(device, policy)
    run = _Run()
    with scratch_folder(problem, source, job) as scratch, ExitStack() as stack:
        reference = None
        if device != "cuda-compile-only":
            reference = facts.reference = _reference(evaluation, facts, problem, policy, job, scratch, say)
            if policy.hardening:
                run.check_canaries(reference, policy, facts.canary_notes)
        if reference is not None and not policy.skip_timing:
            # started now, so its interpreter starts while the candidate builds and runs
            run.ref_session = stack.enter_context(reference_session(problem, reference, job, policy))
            if policy.noise_floor:
                run.ref_copy = stack.enter_context(reference_session(problem, reference, job, policy))
            run.more_sets = partial(_process_set, problem, source, reference, job, policy)
        say("building and running the candidate in an isolated process")
        session = ChildSession(scratch, limits_for(device, policy), "candidate", on_build=builds,
                               forkable=forkable(device), shared=shared_slots(stack, reference, job, policy))
        try:
            _converse(facts, session, run, reference, policy, job, scratch, say, evaluation.phase_seconds)
        except ChildStopped as stop:
            run.stopped = str(stop)
        finally:
            outcome = session.close()
        evaluation.build = {"builds": [{k: v for k, v in b.items() if k != "source_text"} for b in builds.records]}
        facts.builds = builds.records
        _gather_child(evaluation, facts, scratch, outcome, run, policy)
        evaluation.isolation["scratch_quota_mb"] = policy.scratch_limit_mb if is_quota(scratch) else None
        facts.limit = builds.limit_hit or scratch_full(scratch, job)


def _gather_child(evaluation: Evaluation, facts: Facts, scratch: Path, outcome: ChildOutcome, run: _Run,
                  policy: EvalPolicy) -> None:
    """How the candidate's process ended, what it reported, and the knock-out's output it left behind."""
    result = read_result(scratch)
    events = _record_child(evaluation, scratch, outcome, result)
    facts.child = ChildFacts(outcome, result, events, log_tail(scratch) if result is None else "", run.stopped,
                             run.failure, run.phase)
    if result is not None and result.telemetry:
        facts.notes += telemetry_flags(result.telemetry.get("before", {}), result.telemetry.get("after", {}))
    if run.knockout_call and (scratch / J.KNOCKOUT_FILE).exists() and facts.reference is not None:
        facts.knockout_matched = _knocked_out_still_right(scratch / J.KNOCKOUT_FILE, facts.reference, policy)
    if run.canaries is not None and decide(facts, policy, CORRECTNESS).verdict is Verdict.ACCEPTED:
        facts.degenerate = run.degenerate()  # waits for the check, so its notes are complete


def _knocked_out_still_right(path: Path, reference: ReferenceRun, policy: EvalPolicy) -> bool:
    """Whether forward, with every function of the extension poisoned, still returned the right answer."""
    try:
        knocked = _load(path)
    except Exception:  # a tampered file proves nothing either way; the other checks still run
        return False
    expected = reference.outputs[0] if reference.knockout_output is None else reference.knockout_output
    return knocked is not None and compare_trial(reference.trial_seeds[0], expected, knocked, policy).passed


def _reference(evaluation: Evaluation, facts: Facts, problem: Problem, policy: EvalPolicy, job: J.ChildJob,
               scratch: Path, say: Progress) -> ReferenceRun:
    say("computing reference outputs")
    started = time.perf_counter()
    seeds = [secrets.randbits(31) for _ in range(policy.trials)]
    reference = run_reference(problem, job.device, job.init_seed, seeds, policy.cpu_threads,
                              vary_distributions=policy.hardening)
    save_inputs(scratch, reference, parent_calls=parent_calls(job, policy))
    evaluation.isolation.setdefault("precision_settings", {})["reference"] = reference.settings
    facts.notes += reference.notes
    evaluation.phase_seconds["reference"] = time.perf_counter() - started
    return reference


def _failed(reply: dict[str, Any], run: _Run) -> bool:
    if "failed" in reply:
        run.failure = reply
        return True
    return False


def _converse(facts: Facts, session: ChildSession, run: _Run, reference: ReferenceRun | None, policy: EvalPolicy,
              job: J.ChildJob, scratch: Path, say: Progress, phase_seconds: dict[str, float]) -> None:
    """load -> correctness -> timing (against the reference's own child) -> finish. Each step after correctness
    runs only while the correctness gates pass: nothing is timed that is decided. The knock-out, the kernels'
    clocked share and the compute census are audit batches among the timed calls, at positions only the parent
    draws (harness/measurement/timed_calls.py); where nothing is timed, the knock-out and the census are calls of
    their own after the trials."""
    if _failed(session.request(P.Load()), run):
        return
    loaded = _processes(session)  # (before the load the jail's own processes are still being made)
    if reference is None:  # compile-only: nothing runs
        _failed(session.request(P.Finish()), run)
        return
    if session.shared is not None:  # the parent drives every call (harness/measurement/frozen_trials.py)
        outputs = _checked_trials(facts, session, run, reference, phase_seconds)
    else:  # CUDA, or no freezer here: the child runs the trials and saves their outputs
        outputs = None if _failed(session.request(P.Correctness()), run) else _saved_outputs(facts, scratch)
    if run.failure:
        return
    if outputs is not None:  # None: unreadable outputs or a broken protocol, in the facts already
        _compare_outputs(facts, outputs, reference, policy)
    if decide(facts, policy, CORRECTNESS).verdict is not Verdict.ACCEPTED:
        _failed(session.request(P.Finish()), run)
        return
    if run.ref_session is None and policy.hardening and policy.knockout and not is_off("knockout"):
        run.knockout_call = not _failed(session.request(_knockout_command(session, run, reference)), run)
        facts.knockout_matched = False if run.knockout_call else None  # compared once the child is done (its file)
    if run.ref_session is None and policy.hardening and policy.static_policy != "off" and not run.failure:
        reply = session.request(_slot_command(P.Census, session, run, reference.trial_inputs[0]))
        facts.census = None if _failed(reply, run) else _valid_census(reply.get("census"))
    if run.ref_session is not None and not run.failure and not run.degenerate():  # a degenerate problem's speedup
        say("timing reference and candidate, each in its own process")  # would mean nothing
        try:
            facts.timed = _time_sets(session, run, reference, policy, job, scratch)
            phase_seconds["timing_wait"] = facts.timed.slot_wait_s
            facts.knockout_matched = facts.timed.knocked_out_right
            if facts.timed.census_ops is not None:
                facts.census = {"ops": facts.timed.census_ops, "share": None, "calls": facts.timed.census_calls,
                                "flops": facts.timed.census_flops}
        except ChildFailed as failed:  # the candidate's forward raised while being timed
            run.failure = failed.reply
    if not run.failure:
        ended = _processes(session)
        facts.processes = (loaded, ended) if loaded and ended else None
        _failed(session.request(P.Finish()), run)


def _processes(session: ChildSession) -> int | None:
    """How many processes the candidate's cgroup holds now (None where there is no cgroup to count in)."""
    if is_off("processes"):
        return None
    return len(session.jailed.group.pids()) or None


def _slot_command(kind: type[P.Knockout] | type[P.Census], session: ChildSession, run: _Run,
                  inputs: list[Any]) -> P.Knockout | P.Census:
    """`kind` on `inputs`, written by the parent into input slot 0 (frozen) where it makes the calls."""
    if run.checked_side is None or not run.checked_side.slots:
        return kind()
    session.freeze()
    try:
        run.checked_side.write(0, inputs)
    finally:
        session.thaw()
    return kind(slot=0)


def _valid_census(found: Any) -> dict[str, Any] | None:
    """The child's census (untrusted: it can only make things worse for the candidate, or hide them)."""
    if not isinstance(found, dict) or not isinstance(found.get("ops"), dict):
        return None
    ops = {str(k)[:60]: v for k, v in list(found["ops"].items())[:50] if type(v) is int and v > 0}
    library, own = found.get("library_s"), found.get("own_s")
    timed = type(library) is float and type(own) is float and library + own > 0
    return {"ops": ops, "share": own / (own + library) if timed else None,
            "flops": census_flops(found)}


def _knockout_command(session: ChildSession, run: _Run, reference: ReferenceRun) -> P.Knockout | P.Census:
    """Where the parent made the trials, it writes the knock-out's inputs into input slot 0 too (frozen): they
    were never in the candidate's folder."""
    return _slot_command(P.Knockout, session, run, reference.knockout_inputs or reference.trial_inputs[0])


def _checked_trials(facts: Facts, session: ChildSession, run: _Run, reference: ReferenceRun,
                    phase_seconds: dict[str, float]) -> list[Any] | None:
    """The trials through the candidate's input slots, as every timed call is made; None when its process failed
    (the failure is in `run`) or broke the protocol (in the facts)."""
    started, run.phase = time.perf_counter(), "correctness"
    run.checked_side = FrozenSide(session, False, output_bound(reference.outputs[0]))
    try:
        with checking_slot(facts.device):
            run.checked_side.prepare(slot_count(reference.trial_inputs[0]))
            checked = run_trials(run.checked_side, reference.trial_inputs, random.Random(secrets.randbits(31)),
                                 reference.mutates_inputs)
    except SideFailure as exc:
        if exc.reply is not None:
            run.failure = exc.reply
        else:
            facts.protocol_broken = str(exc)
        return None
    finally:
        session.thaw()
        phase_seconds["correctness"] = time.perf_counter() - started
    run.phase, facts.checked = None, checked
    return checked.outputs


def _saved_outputs(facts: Facts, scratch: Path) -> list[Any] | None:
    try:
        return _load(scratch / J.OUTPUTS_FILE)
    except Exception as exc:  # a missing or tampered file: the candidate's problem, never the caller's
        facts.unreadable = type(exc).__name__
        return None


@dataclass
class _ProcessSet:
    """A fresh set of timed processes: the candidate's (its own scratch folder, loading the cached build again),
    the reference's and, with `noise_floor`, the reference's copy; each with its own input slots (CPU)."""

    candidate: ChildSession
    scratch: Path
    ref: ChildSession
    copy: ChildSession | None


def _process_set(problem: Problem, source: str, reference: ReferenceRun, job: J.ChildJob, policy: EvalPolicy,
                 stack: ExitStack) -> _ProcessSet:
    """Started fresh, closed with `stack`. The candidate's source is the parent's copy, never the file its first
    process could write, and its builds go through a build service of their own (cached: nothing is compiled
    again, and the evaluation's own build records and limits stay those of its first process)."""
    ref = stack.enter_context(reference_session(problem, reference, job, policy))
    copy = stack.enter_context(reference_session(problem, reference, job, policy)) if policy.noise_floor else None
    scratch = stack.enter_context(scratch_folder(problem, source, job))
    save_inputs(scratch, reference, parent_calls=parent_calls(job, policy))
    candidate = ChildSession(scratch, limits_for(job.device, policy), "candidate",
                             on_build=build_service(job.device, policy), forkable=forkable(job.device),
                             shared=shared_slots(stack, reference, job, policy))
    stack.callback(candidate.close)
    return _ProcessSet(candidate, scratch, ref, copy)


def _time_sets(session: ChildSession, run: _Run, reference: ReferenceRun, policy: EvalPolicy, job: J.ChildJob,
               scratch: Path) -> TimedRun:
    """`process_pairs` independent sets of timed processes, one after the other, each on its share of the budget
    (`set_policy`, harness/paired_timing.py): the first is the candidate's checked process with the references started beside it, each
    further one fresh (`_process_set`). The fresh candidates load together before any set is timed (their imports
    overlap; none loads while another set is timed). A rerun gets other processes; so does each set, and the
    interval reads the spread between them (harness/decision/timing_reading.py)."""
    sets = policy.process_pairs if run.more_sets is not None else 1
    share = set_policy(policy, sets)
    assert run.ref_session is not None
    with ExitStack() as stack:
        fresh = [run.more_sets(stack) for _ in range(sets - 1)] if run.more_sets is not None else []
        _load_all([one.candidate for one in fresh])
        runs = [time_both(session, run.ref_session, reference, share, job, scratch, run.checked_side, run.ref_copy)]
        planned = len(runs[0].ref_ms) if runs[0].pilot_batches else None  # its pilot's prediction serves every set
        for one in fresh:
            if runs[-1].failures:
                break
            runs.append(_time_fresh_set(one, reference, share, job, planned))
    return combined(runs)


def _load_all(candidates: list[ChildSession]) -> None:
    """`load` in every fresh candidate process at once; a candidate that fails to load fails the evaluation."""
    if not candidates:
        return
    with ThreadPoolExecutor(max_workers=len(candidates), thread_name_prefix="kernelwright-load") as pool:
        for loaded in list(pool.map(lambda candidate: candidate.request(P.Load()), candidates)):
            if "failed" in loaded:
                raise ChildFailed(loaded, reference=False)


def _time_fresh_set(fresh: _ProcessSet, reference: ReferenceRun, policy: EvalPolicy, job: J.ChildJob,
                    planned: int | None) -> TimedRun:
    """One fresh set timed with every check of the first set (probes, full checks, held outputs, aliasing,
    mutation), then finished, what its candidate observed in itself (replaced functions, threads) a failure of the
    timing like any other. A candidate that fails here fails the evaluation."""
    loaded = _processes(fresh.candidate)  # (loaded already, beside the other fresh sets, by `_load_all`)
    timed = time_both(fresh.candidate, fresh.ref, reference, policy, job, fresh.scratch, None, fresh.copy,
                       planned)
    if timed.failures:
        return timed
    ended = _processes(fresh.candidate)
    if loaded and ended and ended > loaded and policy.hardening:
        timed.failures.append(Finding(
            Check.PROCESSES, f"a fresh process of the candidate grew from {loaded} to {ended} "
            "processes while timed: a process it started was still running"))
        return timed
    finished = fresh.candidate.request(P.Finish())
    if "failed" in finished:
        raise ChildFailed(finished, reference=False)
    result = read_result(fresh.scratch)
    if result is None:
        timed.failures.append(Finding(Check.TIMING, "a fresh process of the candidate, timed as another set, left no "
                                      "result"))
    else:
        timed.failures += integrity_failures(result, reference, policy, job.device)
    return timed


def _load(path: Path) -> Any:
    import torch

    return torch.load(path, weights_only=True)


def _compare_outputs(facts: Facts, outputs: Any, reference: ReferenceRun, policy: EvalPolicy) -> None:
    """Every call of every trial against the reference's output; the worst call of each trial is kept."""
    if not isinstance(outputs, list):
        facts.outputs_count = -1
        return
    facts.outputs_count = len(outputs)
    if len(outputs) != len(reference.outputs):
        return
    facts.comparisons = []
    for index, (seed, expected, got) in enumerate(zip(reference.trial_seeds, reference.outputs, outputs)):
        calls = got if isinstance(got, list) and got else [got]
        results = [compare_trial(seed, expected, call, policy) for call in calls]
        trial = next((r for r in results if not r.passed), results[0])
        trial.distribution = reference.distributions[index]
        facts.comparisons.append(Comparison(trial, repeated=not trial.passed and results[0].passed and len(results) > 1))
    if all(c.trial.passed for c in facts.comparisons):  # correct: how close to a float64 run, and repeatable?
        firsts = [(got if isinstance(got, list) and got else [got])[0] for got in outputs]
        facts.contract = numerical_contract(reference, firsts, policy.cpu_threads, policy.oracle_multiple)
        facts.deterministic = deterministic(outputs) if facts.checked is not None else None
