"""`evaluate()`: judge one candidate against one problem on one device. The parent decides everything."""

from __future__ import annotations

import hashlib
import math
import random
import secrets
import statistics
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.child import job as J
from harness.child.child_run import build_service, forkable, limits_for
from harness.child.scratch import read_result, save_inputs, scratch_folder, scratch_full
from harness.child.verdicts import child_failure, integrity_failures, read_events
from harness.defences import is_off
from harness.device import resolve_device
from harness.feedback.nvml import telemetry_flags
from harness.feedback.roofline import roofline
from harness.isolation.sandbox import ChildOutcome
from harness.isolation.scratch_quota import is_quota
from harness.isolation.session import ChildSession, ChildStopped
from harness.isolation.shared_slots import SharedSlots
from harness.isolation.timing_slot import checking_slot, timing_slot
from harness.measurement.frozen_calls import FrozenSide, SideFailure, output_bound, parent_driven, slot_count
from harness.measurement.frozen_trials import CheckedTrials, cache_finding, run_trials
from harness.measurement.timed_calls import ChildFailed, Timing, TimedRun, TimingProtocolError
from harness.measurement.timed_checks import PROBE_POSITIONS
from harness.measurement.noise import noise_reasons, significant, spread, widened
from harness.measurement.timing import believed_samples, speedup_interval, summarize
from harness.policy import EvalPolicy
from harness.records import Evaluation, Verdict
from harness.verification.canaries import passing_canaries
from harness.verification.compare import compare_trial
from harness.verification.reference import ReferenceRun, run_reference
from harness.verification.source_scan import scan_built_sources
from harness.verification.static_check import check_candidate
from kernelbench.problem import Problem, ProblemError

REFERENCE_ONLY = "# the reference's timing process: no candidate code\n"

Progress = Callable[[str], None]
_BACKGROUND = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kernelwright-canaries")  # one per evaluation


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


_STATIC_NOTES = {"[torch-compute", "[library-compute", "[precision", "[problem-override", "[global-state"}


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
    second.reasons.extend(r for r in first.reasons if r.split("]")[0] in _STATIC_NOTES)
    _run_isolated(second, problem, source, device, policy, say)
    second.reasons.append(f"[re-measured] first measurement {first.speedup:.2f}x was above "
                          f"{policy.implausible_speedup:g}x; this is a second, fresh-process measurement")
    if second.accepted and first.speedup and second.speedup:
        second.speedup = min(first.speedup, second.speedup)  # report the less flattering of the two
    for name, seconds in first.phase_seconds.items():
        second.phase_seconds[f"first_{name}"] = seconds
    return second


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
            evaluation.reasons.extend(telemetry_flags(result.telemetry.get("before", {}),
                                                      result.telemetry.get("after", {})))
        evaluation.build["threads"] = result.threads
        evaluation.build["kernel_calls"] = result.kernel_calls
    return events


class _Run:
    """What happened in one isolated run, for `_decide`."""

    def __init__(self) -> None:
        self.failure: dict[str, Any] | None = None  # the child's own failure report
        self.stopped: str | None = None
        self.timed: TimedRun | None = None
        self.knockout = False
        self.canaries: Future[list[str]] | None = None
        self.canary_notes: list[str] = []  # what the canaries could not check (`[ablation]`)
        self.census: dict[str, Any] | None = None  # PyTorch compute forward ran outside the kernels (child/census.py)
        self.ref_session: ChildSession | None = None
        self.ref_copy: ChildSession | None = None  # a second reference process: the A/A noise floor
        self.checked_side: FrozenSide | None = None  # the candidate's slots, where the parent drove the trials
        self.phase: str | None = None  # "correctness" while the parent drives the trials
        self.checked: CheckedTrials | None = None  # what the parent-driven trials saw

    def check_canaries(self, reference: ReferenceRun, policy: EvalPolicy) -> None:
        """In the background, while the candidate's process starts and runs (the parent only waits then)."""
        self.canaries = _BACKGROUND.submit(passing_canaries, reference, policy, self.canary_notes)

    @property
    def degenerate(self) -> list[str]:
        """The canaries that pass every trial (waits for their check)."""
        return self.canaries.result() if self.canaries is not None else []


def _run_isolated(evaluation: Evaluation, problem: Problem, source: str, device: str, policy: EvalPolicy,
                  say: Progress) -> None:
    job = J.ChildJob(mode="evaluate", device=device, policy=policy,  # a pool seed only where the children stage
                     pool_seed=None if parent_driven(device) else secrets.randbits(31))
    builds = build_service(device, policy)
    run = _Run()
    with scratch_folder(problem, source, job) as scratch, ExitStack() as stack:
        reference = None
        if device != "cuda-compile-only":
            reference = _reference(evaluation, problem, device, policy, job, scratch, say)
            if policy.hardening:
                run.check_canaries(reference, policy)
        if reference is not None and not policy.skip_timing:
            # started now, so its interpreter starts while the candidate builds and runs
            run.ref_session = stack.enter_context(_reference_session(problem, reference, job, policy))
            if policy.noise_floor:
                run.ref_copy = stack.enter_context(_reference_session(problem, reference, job, policy))
        say("building and running the candidate in an isolated process")
        session = ChildSession(scratch, limits_for(device, policy), "candidate", on_build=builds,
                               forkable=forkable(device), shared=_shared_slots(stack, reference, job, policy))
        try:
            _converse(evaluation, session, run, problem, reference, policy, job, scratch, say)
        except ChildStopped as stop:
            run.stopped = str(stop)
        finally:
            outcome = session.close()
        evaluation.build = {"builds": [{k: v for k, v in b.items() if k != "source_text"} for b in builds.records]}
        _decide(evaluation, problem, scratch, outcome, reference, policy, run, builds.records)
        evaluation.isolation["scratch_quota_mb"] = policy.scratch_limit_mb if is_quota(scratch) else None
        limit = builds.limit_hit or scratch_full(scratch, job)
        if limit:  # whatever the child made of its refused build or write, this is why
            evaluation.verdict = Verdict.REJECTED
            evaluation.reasons.insert(0, limit)


@contextmanager
def _reference_session(problem: Problem, reference: ReferenceRun, job: J.ChildJob,
                       policy: EvalPolicy) -> Iterator[ChildSession]:
    """The reference's timing child gets its own scratch folder: it never sees candidate code or files."""
    with scratch_folder(problem, REFERENCE_ONLY, job) as ref_scratch:
        save_inputs(ref_scratch, reference)
        with ExitStack() as slots:
            ref = ChildSession(ref_scratch, limits_for(job.device, policy), "reference", forkable=forkable(job.device),
                               shared=_shared_slots(slots, reference, job, policy))
            try:
                yield ref
            finally:
                ref.close()


def _parent_calls(job: J.ChildJob, policy: EvalPolicy) -> bool:
    """Whether the parent makes the candidate's calls through its input slots (the CPU, where the children can be
    frozen and read), trials included; elsewhere the child runs the trials from its folder and stages its inputs."""
    return job.pool_seed is None and not policy.skip_timing


def _shared_slots(stack: ExitStack, reference: ReferenceRun | None, job: J.ChildJob,
                  policy: EvalPolicy) -> SharedSlots | None:
    """A timed child's input slots in a file the parent maps too (closed with `stack`), where the parent will
    write every timed input itself; None where the children stage their own (their job carries a pool seed)."""
    if reference is None or not _parent_calls(job, policy):
        return None
    shared = SharedSlots(reference.trial_inputs[0], slot_count(reference.trial_inputs[0]))
    stack.callback(shared.close)
    return shared


def _reference(evaluation: Evaluation, problem: Problem, device: str, policy: EvalPolicy, job: J.ChildJob,
               scratch: Path, say: Progress) -> ReferenceRun:
    say("computing reference outputs")
    started = time.perf_counter()
    seeds = [secrets.randbits(31) for _ in range(policy.trials)]
    reference = run_reference(problem, device, job.init_seed, seeds, policy.cpu_threads,
                              vary_distributions=policy.hardening)
    save_inputs(scratch, reference, parent_calls=_parent_calls(job, policy))
    evaluation.reasons.extend(reference.notes)
    evaluation.phase_seconds["reference"] = time.perf_counter() - started
    return reference


def _failed(reply: dict[str, Any], run: _Run) -> bool:
    if "failed" in reply:
        run.failure = reply
        return True
    return False


def _converse(evaluation: Evaluation, session: ChildSession, run: _Run, problem: Problem,
              reference: ReferenceRun | None, policy: EvalPolicy, job: J.ChildJob, scratch: Path,
              say: Progress) -> None:
    """load -> correctness -> knock-out -> timing (against the reference's own child) -> finish."""
    if _failed(session.request({"cmd": "load"}), run):
        return
    if reference is None:  # compile-only: nothing runs
        _failed(session.request({"cmd": "finish"}), run)
        return
    if session.shared is not None:  # the parent drives every call (harness/measurement/frozen_trials.py)
        outputs = _checked_trials(evaluation, session, run, reference)
    else:  # CUDA, or no freezer here: the child runs the trials and saves their outputs
        outputs = None if _failed(session.request({"cmd": "correctness"}), run) else _saved_outputs(evaluation, scratch)
    if run.failure:
        return
    if outputs is not None:  # None: a verdict already (unreadable outputs, a broken protocol)
        _judge_outputs(evaluation, outputs, reference, policy)
    if evaluation.verdict is Verdict.ACCEPTED and policy.hardening and policy.knockout:
        run.knockout = not _failed(session.request(_knockout_command(session, run, reference)), run)
    if evaluation.verdict is Verdict.ACCEPTED and policy.hardening and policy.static_policy != "off" \
            and not run.failure:
        reply = session.request(_slot_command("census", session, run, reference.trial_inputs[0]))
        run.census = None if _failed(reply, run) else _valid_census(reply.get("census"))
    if evaluation.verdict is Verdict.ACCEPTED and run.ref_session is not None and not run.failure \
            and not run.degenerate:  # a degenerate problem's speedup would mean nothing
        say("timing reference and candidate, each in its own process")
        try:
            run.timed = _time_both(session, run.ref_session, reference, policy, job, scratch, run.checked_side,
                                   run.ref_copy)
            evaluation.phase_seconds["timing_wait"] = run.timed.slot_wait_s
        except ChildFailed as failed:  # the candidate's forward raised while being timed
            run.failure = failed.reply
    if not run.failure:
        _failed(session.request({"cmd": "finish"}), run)


NEGLIGIBLE_SHARE = 0.05  # the candidate's kernels' part of the compute time under which the speedup is PyTorch's


def _slot_command(name: str, session: ChildSession, run: _Run, inputs: list[Any]) -> dict[str, Any]:
    """`name` on `inputs`, written by the parent into input slot 0 (frozen) where it makes the calls."""
    if run.checked_side is None or not run.checked_side.slots:
        return {"cmd": name}
    session.freeze()
    try:
        run.checked_side.write(0, inputs)
    finally:
        session.thaw()
    return {"cmd": name, "slot": 0}


def _valid_census(found: Any) -> dict[str, Any] | None:
    """The child's census (untrusted: it can only make things worse for the candidate, or hide them)."""
    if not isinstance(found, dict) or not isinstance(found.get("ops"), dict):
        return None
    ops = {str(k)[:60]: v for k, v in list(found["ops"].items())[:50] if type(v) is int and v > 0}
    library, own = found.get("library_s"), found.get("own_s")
    timed = type(library) is float and type(own) is float and library + own > 0
    return {"ops": ops, "share": own / (own + library) if timed else None}


def _runtime_compute(evaluation: Evaluation, census: dict[str, Any] | None, policy: EvalPolicy) -> bool:
    """PyTorch compute that forward ran outside the candidate's kernels, however it was reached: strict rejects
    it; default says it (with the kernels' share of the compute time, on the CPU). True when rejected."""
    if not census or not census["ops"]:
        return False
    ops = ", ".join(f"{name} x{count}" for name, count in sorted(census["ops"].items()))
    share = census["share"]
    evaluation.isolation["runtime_compute"] = {"ops": census["ops"], "kernel_share": share}
    said = (f"[runtime-compute] forward ran PyTorch's own compute outside the candidate's kernels ({ops})"
            + (f"; the candidate's kernels did {share:.0%} of the compute time" if share is not None else ""))
    if policy.static_policy == "strict":
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons.insert(0, said + ": strict requires all of forward's compute in the candidate's kernels")
        return True
    if share is not None and share < NEGLIGIBLE_SHARE:
        said += ": the speedup measured is PyTorch's, not the kernel's"
    evaluation.reasons.append(said)
    return False



def _knockout_command(session: ChildSession, run: _Run, reference: ReferenceRun) -> dict[str, Any]:
    """Where the parent made the trials, it writes the knock-out's inputs into input slot 0 too (frozen): they
    were never in the candidate's folder."""
    return _slot_command("knockout", session, run, reference.knockout_inputs or reference.trial_inputs[0])


def _checked_trials(evaluation: Evaluation, session: ChildSession, run: _Run,
                    reference: ReferenceRun) -> list[Any] | None:
    """The trials through the candidate's input slots, as every timed call is made; None when its process failed
    (the failure is in `run`) or broke the protocol (a verdict already)."""
    started, run.phase = time.perf_counter(), "correctness"
    run.checked_side = FrozenSide(session, False, output_bound(reference.outputs[0]))
    try:
        with checking_slot(evaluation.device):
            run.checked_side.prepare(slot_count(reference.trial_inputs[0]))
            checked = run_trials(run.checked_side, reference.trial_inputs, random.Random(secrets.randbits(31)),
                                 reference.mutates_inputs)
    except SideFailure as exc:
        if exc.reply is not None:
            run.failure = exc.reply
        else:
            evaluation.verdict = Verdict.REJECTED
            evaluation.reasons.insert(0, f"[timing] the candidate's process broke the call protocol: {exc}")
        return None
    finally:
        session.thaw()
        evaluation.phase_seconds["correctness"] = time.perf_counter() - started
    run.phase, run.checked = None, checked
    return checked.outputs


def _saved_outputs(evaluation: Evaluation, scratch: Path) -> list[Any] | None:
    try:
        return _load(scratch / J.OUTPUTS_FILE)
    except Exception as exc:  # a missing or tampered file: the candidate's problem, never the caller's
        evaluation.verdict = Verdict.CRASH
        evaluation.reasons.insert(0, f"the candidate's outputs could not be read back: {type(exc).__name__}")
        return None


def _time_both(session: ChildSession, ref: ChildSession, reference: ReferenceRun, policy: EvalPolicy,
               job: J.ChildJob, scratch: Path, checked: FrozenSide | None = None,
               copy: ChildSession | None = None) -> TimedRun:
    """The reference's children load before the device's timing slot is taken: the slot only covers measuring."""
    references = (ref,) if copy is None else (ref, copy)
    for child in references:
        child.clock_from_now()  # it waited for the candidate: its run clock starts with its own work
    try:
        timing = Timing(ref, session, reference, policy, job.device, scratch, job.pool_seed, secrets.randbits(31),
                        checked, copy)
    except TimingProtocolError as exc:
        raise ProblemError(f"timing cannot run here: {exc}") from None
    try:
        if any("failed" in child.request({"cmd": "load"}) for child in references):
            raise ProblemError("the reference failed to load in its timing process")
        ours = tuple(s.jailed.group.freezer for s in (*references, session) if s.jailed.group.freezer is not None)
        with timing_slot(job.device, keep=ours, cpus=ref.jailed.limits.cpus) as slot:
            timing.run.slot_wait_s, timing.run.frozen_builds = slot.waited_s, slot.frozen_builds
            try:
                return timing.measure()
            finally:  # frozen between batches by the protocol: they answer `finish` after this
                for child in (*references, session):
                    child.thaw()
    except TimingProtocolError as exc:
        if str(exc).startswith("the reference's"):  # the machine's doing, never the candidate's
            raise ProblemError(f"timing could not run on this machine now: {exc}") from None
        timing.run.failures.append(f"[timing] the candidate's process broke the timing protocol: {exc}")
        return timing.run
    except ChildFailed as failed:
        if failed.reference:
            raise ProblemError(f"the reference failed while being timed: {failed}") from None
        raise
    except ChildStopped:
        if any(child.stopped for child in references) and not session.stopped:
            stopped = next(child.stopped for child in references if child.stopped)
            raise ProblemError(f"the reference's timing process stopped ({stopped})") from None
        raise


def _decide(evaluation: Evaluation, problem: Problem, scratch: Path, outcome: ChildOutcome,
            reference: ReferenceRun | None, policy: EvalPolicy, run: _Run, builds: list[dict[str, Any]]) -> None:
    result = read_result(scratch)
    events = _record_child(evaluation, scratch, outcome, result)
    failure = child_failure(outcome, result, events, scratch, policy, run.phase)
    if failure and (run.stopped or run.failure or result is None):
        evaluation.verdict, reasons = failure
        evaluation.reasons = reasons + [r for r in evaluation.reasons if not r.startswith("[correctness]")]
        evaluation.trials = []
        return
    assert result is not None
    if _rejected_after_build(evaluation, builds, policy):
        return
    if result.status == "compiled" and not any(b.get("cuda") for b in builds):
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons.insert(0, "compile-only CUDA device: the candidate built no CUDA sources")
        return
    if result.status == "compiled":
        evaluation.verdict = Verdict.COMPILED
        evaluation.reasons.append("compile-only CUDA device: the kernel and its host binding compiled; "
                                  "correctness and speed need a GPU")
        evaluation.reasons.extend(f"not checked: {b['skipped']}" for b in builds if b.get("skipped"))
        return
    assert reference is not None
    checked = run.checked.findings if run.checked is not None and policy.hardening else []
    decisive = checked + integrity_failures(result, reference, policy) + _kernel_use(evaluation, scratch, reference, policy,
                                                                          result, run)
    if decisive:
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons[:0] = decisive
        return
    if evaluation.verdict is not Verdict.ACCEPTED or _runtime_compute(evaluation, run.census, policy):
        return
    degenerate = run.degenerate  # waits for the check, so its notes are complete
    evaluation.reasons.extend(run.canary_notes)
    if degenerate:
        evaluation.verdict = Verdict.DEGENERATE
        evaluation.reasons.insert(0, f"[degenerate-problem] correct, but trivial answers pass every trial of this "
                                  f"problem too ({'; '.join(run.degenerate)}): correctness here proves nothing, so "
                                  "no speedup is reported")
        return
    if run.timed is not None and run.checked is not None and policy.hardening and run.timed.kernel_calls:
        cached = cache_finding(run.checked, run.timed.kernel_calls, run.timed.candidate_calls)
        if cached and policy.static_policy == "strict":
            evaluation.verdict = Verdict.REJECTED
            evaluation.reasons.insert(0, cached)
            return
        evaluation.reasons += [cached] if cached else []
    if run.timed is not None:
        _judge_timing(evaluation, run.timed, policy)
        _state_the_protocol(evaluation, run.timed, policy)
        if evaluation.accepted:
            evaluation.roofline = roofline(problem, evaluation.device, evaluation.device_info, evaluation.ref_ms,
                                           evaluation.candidate_ms)


def _kernel_use(evaluation: Evaluation, scratch: Path, reference: ReferenceRun, policy: EvalPolicy,
                result: J.ChildResult, run: _Run) -> list[str]:
    """Ghost kernels: forward must depend on the candidate's kernel where it is checked and where it is timed."""
    if not policy.hardening or evaluation.verdict is not Verdict.ACCEPTED:
        return []
    calls = result.kernel_calls
    findings = []
    timed = run.timed.kernel_calls if run.timed and run.timed.kernel_calls is not None else calls.get("timed")
    if calls.get("wrapped_functions") and run.timed and run.timed.candidate_ms and not timed:
        findings.append("[ghost-kernel] the candidate's kernel functions were never called during the timed calls: "
                        "what was timed is some other code path")
    if run.knockout and (scratch / J.KNOCKOUT_FILE).exists():
        knocked = _load(scratch / J.KNOCKOUT_FILE)
        expected = reference.outputs[0] if reference.knockout_output is None else reference.knockout_output
        if knocked is not None and compare_trial(reference.trial_seeds[0], expected, knocked, policy).passed:
            findings.append("[ghost-kernel] with every function of the candidate's extension poisoned, forward() "
                            "still returned the right answer: the kernel does not compute the measured output")
    return findings


def _rejected_after_build(evaluation: Evaluation, builds: list[dict[str, Any]], policy: EvalPolicy) -> bool:
    if policy.require_custom_kernel and not [b for b in builds if b.get("binary")]:
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons.insert(0, "[no-kernel] no custom kernel was built while importing the candidate")
        return True
    if policy.static_policy == "off":
        return False
    findings = scan_built_sources(builds, strict=policy.static_policy == "strict")
    fatal = [f.render() + " (in the sources actually compiled)" for f in findings if f.fatal]
    if fatal:
        evaluation.verdict = Verdict.REJECTED
        evaluation.reasons[:0] = fatal
        return True
    return False


def _load(path: Path) -> Any:
    import torch

    return torch.load(path, weights_only=True)


def _judge_outputs(evaluation: Evaluation, outputs: Any, reference: ReferenceRun, policy: EvalPolicy) -> None:
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
            which = " (on a repeated call)" if results[0].passed and len(results) > 1 else ""
            failures.append(f"[correctness] trial {index + 1} of {len(outputs)} ({trial.distribution} inputs)"
                            f"{which}: {trial.message}")
    evaluation.verdict = Verdict.INCORRECT if failures else Verdict.ACCEPTED
    evaluation.reasons[:0] = failures


def _judge_timing(evaluation: Evaluation, timed: TimedRun, policy: EvalPolicy) -> None:
    if timed.failures:
        evaluation.verdict = Verdict.INCORRECT if timed.failures[0].startswith("[timed-check]") else Verdict.REJECTED
        evaluation.reasons[:0] = timed.failures
        return
    if not timed.ref_ms or len(timed.ref_ms) != len(timed.candidate_ms):
        evaluation.verdict = Verdict.CRASH
        evaluation.reasons.insert(0, "the timing phase reported no valid samples")
        return
    ref, candidate, doubt = believed_samples(timed.ref_ms, timed.candidate_ms, timed.ref_event_ms,
                                             timed.candidate_event_ms)
    if doubt:
        evaluation.reasons.append(doubt)
    evaluation.ref_timing = summarize(ref)
    evaluation.candidate_timing = summarize(candidate)
    evaluation.speedup = evaluation.ref_timing.median_ms / max(evaluation.candidate_timing.median_ms, 1e-9)
    within = speedup_interval(ref, candidate)
    evaluation.speedup_ci = within
    _apply_noise_floor(evaluation, timed, ref, within)
    catch = 1 - 0.99 ** timed.checked_calls
    if policy.hardening and timed.checked_calls < policy.timed_checks:
        evaluation.reasons.append(
            f"[checks] only {timed.checked_calls} timed calls were checked, under the {policy.timed_checks} the "
            f"policy asks for (they did not fit in 5x the timing budget): a kernel wrong on 1% of calls would be "
            f"caught with probability {catch:.2f}, not {1 - 0.99 ** policy.timed_checks:.2f}; raise timing_budget_s "
            "for more")
    evaluation.isolation["timing"] = {
        "clock": "CUDA events per call, backed by the parent's clock" if ref is timed.ref_event_ms else
                 "parent perf_counter_ns around each batch; reference in its own process",
        "clock_speedup": round(statistics.median(timed.ref_ms) / max(statistics.median(timed.candidate_ms), 1e-9), 4),
        "parent_reads": timed.parent_reads,  # inputs written and outputs read by the parent, children frozen
        "batch_size": timed.batch_size, "batches": len(ref), "calls_per_model": timed.total_calls,
        "pipe_overhead_ms": round(timed.overhead_ms, 4), "timed_outputs_checked": timed.checked_calls,
        "positions_per_check": PROBE_POSITIONS, "timed_outputs_compared_in_full": timed.full_checks,
        "p_catch_1pct_cache_hits": round(catch, 3), "pilot_batches": timed.pilot_batches,
        "pilot_half_width": None if timed.pilot_half_width is None else round(timed.pilot_half_width, 4),
        "builds_frozen_while_timed": timed.frozen_builds, "held_output_checks": timed.held_checks,
        "load": {"before": timed.load[0].as_dict(), "after": timed.load[1].as_dict()} if timed.load else None}


CHILD_STAGED = ("[protocol] timed by the child-staged protocol{where}: the candidate's process made its own timed "
                "inputs and answered its own probes, so this speedup is not protected against a candidate that patches "
                "the harness code in its own process{verdict}")


def _state_the_protocol(evaluation: Evaluation, timed: TimedRun, policy: EvalPolicy) -> None:
    """No silently weaker path: a speedup the parent did not drive says so, and strict does not credit it."""
    evaluation.isolation["protocol"] = "parent-driven" if timed.parent_reads else "child-staged"
    if timed.parent_reads or not evaluation.accepted or is_off("protocol_statement"):
        return
    where = " (CUDA has no parent-driven path yet)" if evaluation.device == "cuda" else \
        " (this machine lacks a writable cgroup freezer, a sealable shared file or reading a child's memory)"
    strict = policy.static_policy == "strict"
    evaluation.reasons.insert(0, CHILD_STAGED.format(where=where, verdict="; strict refuses it" if strict else ""))
    if strict:
        evaluation.verdict = Verdict.REJECTED


def _apply_noise_floor(evaluation: Evaluation, timed: TimedRun, ref: list[float], within: tuple[float, float]) -> None:
    """The A/A pair (where it ran) widens the interval and decides whether the speedup is one at all."""
    copy = timed.copy_event_ms if ref is timed.ref_event_ms else timed.copy_ms
    precision: dict[str, Any] = {"within_run_ci": [round(v, 4) for v in within]}
    if len(copy) == len(ref) and copy:
        aa_ratio = statistics.median(ref) / max(statistics.median(copy), 1e-9)
        aa = speedup_interval(ref, copy)
        evaluation.noise_floor = aa
        evaluation.speedup_ci = widened(within, aa)
        precision.update({"aa_ratio": round(aa_ratio, 4), "aa_ci": [round(v, 4) for v in aa],
                          "between_process_spread": round(math.expm1(spread(aa)), 4)})
        evaluation.reasons.extend(noise_reasons(aa_ratio, aa, timed.load))
    evaluation.speedup_significant = significant(evaluation.speedup_ci)
    evaluation.isolation["precision"] = precision
