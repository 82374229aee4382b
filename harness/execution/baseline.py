"""Baselines of a problem on a device: eager PyTorch and torch.compile, timed against each other by the same
parent-clocked protocol as every candidate (harness/paired_timing.py `time_both`): the problem's Model in a
reference process (eager) and the same Model wrapped in torch.compile in another (`load` with `compile`, compiled
before the clock starts), in alternating batches on the parent's `perf_counter_ns`, with the A/A copy and the
independent process sets of `EvalPolicy.process_pairs`, every timed call of the compiled side checked against the
reference. So "vs torch.compile" is measured exactly as the speedup beside it. The first set's process compiles
alone; the other sets' compile from a copy of its inductor cache. Measured once per problem revision and device
fingerprint, then reused from the store.

Where torch.compile fails (to compile, or on a checked call), the eager time still comes from the same protocol,
eager against a second eager process, and the record keeps `compile_error`.

Every process runs with the precision settings the reference outputs were computed with (TF32, reduced-precision
reductions, the float32 matmul precision: harness/values/precision.py): each baseline process says its settings once
loaded, and one that differs is refused with the difference as its reason (a baseline timed under other settings is
how CUDA Agent's speedups were inflated). On CUDA, torch.compile is timed in its default mode and in `max-autotune`
(Triton's template search; the record's `timing.max_autotune`), each against eager."""

from __future__ import annotations

import hashlib
import os
import platform
import secrets
import shutil
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.child import job as J
from harness.decision.timing_reading import TimingReading, read_timing, timing_record
from harness.isolation import protocol as P
from harness.isolation.session import ChildSession, ChildStopped
from harness.measurement.frozen_calls import parent_driven
from harness.isolation.protocol import ChildFailed
from harness.measurement.timed_calls import TimedRun, combined
from harness.paired_timing import reference_session, set_policy, time_both
from harness.policy import EvalPolicy
from harness.values.precision import settings_differences
from harness.verification.reference import ReferenceRun, run_reference
from kernelbench.problem import Problem, ProblemError

AUTOTUNE = "max-autotune"
HOW_TIMED = ("parent clock (harness/paired_timing.py time_both): eager and torch.compile each in its own process, "
             "alternating batches, every compiled call checked")


def device_key(device: str, threads: int) -> str:
    """What makes timings comparable: the device model, the thread count (CPU) and torch's version."""
    import torch

    if device == "cuda":
        what = f"cuda|{torch.cuda.get_device_name(0)}|{torch.__version__}"
    else:
        what = f"cpu|{platform.processor() or platform.machine()}|{os.cpu_count()}|{threads}|{torch.__version__}"
    return hashlib.sha256(what.encode()).hexdigest()[:16]


@dataclass
class PairedReferences:
    """The eager reference timed against a second reference process: compiled (the baseline) or plain (A/A)."""

    timed: TimedRun | None
    reading: TimingReading | None
    error: str | None = None  # why the second process gave no timing (its torch.compile failed, say)
    settings: dict[str, str] | None = None  # the precision settings every process ran with (checked equal)


def measure_baselines(problem: Problem, device: str, policy: EvalPolicy) -> dict[str, Any]:
    """{"eager_ms", "compile_ms" (medians on the parent's clock) or "*_error"}, with "compile_speedup" (eager over
    compiled, as a candidate's speedup is read) and its "compile_speedup_ci", and "timing": how it was timed."""
    try:
        compiled = time_references(problem, device, policy, compiled=True)
        if compiled.error is None and compiled.reading is not None:
            reading = compiled.reading
            record = {"eager_ms": reading.ref_stats.median_ms, "compile_ms": reading.candidate_stats.median_ms,
                      "compile_speedup": round(reading.speedup, 4),
                      "compile_speedup_ci": [round(v, 4) for v in reading.interval], "timing": _how(compiled)}
            if device == "cuda":  # max-autotune searches Triton templates: a GPU's mode
                record.update(_autotuned(problem, device, policy, record["timing"]))
            return record
        eager = time_references(problem, device, policy, compiled=False)  # torch.compile failed: eager alone
    except ProblemError as exc:
        return {"error": f"the baselines could not be timed: {exc}"}
    record: dict[str, Any] = {"compile_error": compiled.error or "torch.compile gave no timing"}
    if eager.reading is None:
        record["eager_error"] = eager.error or "eager gave no timing"
        return record
    record.update(eager_ms=eager.reading.ref_stats.median_ms, timing=_how(eager))
    return record


def _autotuned(problem: Problem, device: str, policy: EvalPolicy, timing: dict[str, Any]) -> dict[str, Any]:
    """torch.compile in max-autotune against eager, by the same protocol: into `timing["max_autotune"]`, or a
    `max_autotune_error`."""
    paired = time_references(problem, device, policy, compiled=True, mode=AUTOTUNE)
    if paired.error is not None or paired.reading is None:
        return {"max_autotune_error": paired.error or "torch.compile (max-autotune) gave no timing"}
    reading = paired.reading
    timing["max_autotune"] = {"eager_ms": reading.ref_stats.median_ms, "compile_ms": reading.candidate_stats.median_ms,
                              "compile_speedup": round(reading.speedup, 4),
                              "compile_speedup_ci": [round(v, 4) for v in reading.interval]}
    return {}


def time_references(problem: Problem, device: str, policy: EvalPolicy, *, compiled: bool,
                    mode: str | None = None) -> PairedReferences:
    """The problem's Model (eager) against a second process of it, torch.compile'd where `compiled` (in `mode`, None:
    the default), by the candidates' protocol: `process_pairs` independent sets of fresh processes, each on its share
    of the budget, the first set's pilot sizing the others. ProblemError where the eager reference itself cannot be
    timed; a second process whose precision settings differ from the reference's is refused (`error`)."""
    job = J.ChildJob(mode="evaluate", device=device, policy=policy,  # a pool seed only where the children stage
                     pool_seed=None if parent_driven(device) else secrets.randbits(31))
    reference = run_reference(problem, device, job.init_seed, [secrets.randbits(31) for _ in range(policy.trials)],
                              policy.cpu_threads, vary_distributions=False)
    sets = policy.process_pairs
    share = set_policy(policy, sets)
    with ExitStack() as stack:
        opened = [_open_set(stack, problem, reference, job, policy) for _ in range(sets)]
        others = [other for _, other, _ in opened]
        first, rest = (others[:1], others[1:]) if compiled else (others, [])
        failed = _load_all(first, compiled, reference.settings, mode)
        if not failed and rest:  # the first compiled alone, the others from its cache, together
            _share_compile_cache(first[0].scratch, [other.scratch for other in rest])
            failed = _load_all(rest, compiled, reference.settings, mode)
        if failed:
            return PairedReferences(None, None, failed)
        runs: list[TimedRun] = []
        planned = None
        for eager, other, copy in opened:
            try:
                timed = time_both(other, eager, reference, share, job, other.scratch, None, copy, planned,
                                  audits=False)
            except (ChildFailed, ChildStopped) as exc:  # the second process failed while timed
                return PairedReferences(None, None, _failure(exc, compiled))
            if timed.failures:
                return PairedReferences(None, None, "; ".join(f.message for f in timed.failures)[:2000])
            runs.append(timed)
            if len(runs) == 1 and timed.pilot_batches:  # its pilot's prediction serves every set
                planned = len(timed.ref_ms)
            _finish(eager, other, copy)
    timed = combined(runs)
    return PairedReferences(timed, read_timing(timed), settings=reference.settings)


def _open_set(stack: ExitStack, problem: Problem, reference: ReferenceRun, job: J.ChildJob,
              policy: EvalPolicy) -> tuple[ChildSession, ChildSession, ChildSession | None]:
    """(eager, the other side, the eager copy where `noise_floor`): reference processes, none with candidate code."""
    eager = stack.enter_context(reference_session(problem, reference, job, policy))
    other = stack.enter_context(reference_session(problem, reference, job, policy))
    copy = stack.enter_context(reference_session(problem, reference, job, policy)) if policy.noise_floor else None
    return eager, other, copy


def _load_all(sessions: list[ChildSession], compiled: bool, expected: dict[str, str] | None = None,
              mode: str | None = None) -> str | None:
    """`load` (with `compile`: torch.compile'd in `mode` and warmed, outside any clock) in every set's second process
    at once; the first failure's message, else the first whose precision settings differ from `expected` (the
    reference's), else None. Their run clocks start after it: compiling is not timing."""
    def load(session: ChildSession) -> P.Status | str:
        try:
            return session.request(P.Load(compile=compiled or None, mode=mode if compiled else None))
        except ChildFailed as failed:
            return failed.failed.message or failed.failed.failed
        except P.MalformedReply as exc:
            return str(exc)
        except ChildStopped as exc:
            return f"its process stopped while loading ({exc})"

    with ThreadPoolExecutor(max_workers=len(sessions), thread_name_prefix="kernelwright-baseline") as pool:
        replies = list(pool.map(load, sessions))
    for session in sessions:
        session.clock_from_now()
    failed = next((reply for reply in replies if isinstance(reply, str)), None)
    if failed is None:
        return _unequal_settings([r for r in replies if isinstance(r, P.Status)], expected, compiled, mode)
    return failed[:2000]


def _unequal_settings(replies: list[P.Status], expected: dict[str, str] | None, compiled: bool,
                      mode: str | None) -> str | None:
    """Why a baseline is refused: its process ran with other precision settings than the reference (or said none)."""
    for reply in replies:
        settings = reply.settings
        differences = settings_differences(expected, settings) if isinstance(settings, dict) else ["not reported"]
        if expected and differences:
            what = f"torch.compile ({mode or 'default'})" if compiled else "the second eager"
            return (f"[precision] {what} baseline refused: its process runs with other precision settings than the "
                    f"reference ({'; '.join(differences)}), so its time is not comparable")
    return None


def _share_compile_cache(source: Path, targets: list[Path]) -> None:
    """torch.compile's cache from the first compiled process's TMPDIR (`torchinductor_*`: the code inductor
    generated and the binaries it built) copied into each other process's own TMPDIR before it compiles, so it
    traces the same Model and finds the same code built (on one timing CPU a cold compile took 32 s, one from the
    cache 7 s). Written by a reference process (the problem's Model and torch, no candidate code); opened to the
    jail's user, whoever owns the copy; a copy that does not fit the folder's quota leaves that process to compile
    on its own."""
    for cache in (source / "tmp").glob("torchinductor_*"):
        if cache.is_symlink() or not cache.is_dir():
            continue
        for target in targets:
            copied = target / "tmp" / cache.name
            try:
                shutil.copytree(cache, copied, symlinks=True, dirs_exist_ok=True)
                for root, folders, files in os.walk(copied):
                    os.chmod(root, 0o777)
                    for name in files:
                        path = Path(root) / name
                        if not path.is_symlink():
                            path.chmod(0o777 if path.stat().st_mode & 0o111 else 0o666)
            except OSError:
                shutil.rmtree(copied, ignore_errors=True)


def _finish(*children: ChildSession | None) -> None:
    """`finish` in each timed process of a set, so it exits at once (not after the close's grace)."""
    for child in children:
        if child is not None:
            try:
                child.request(P.Finish())
            except (ChildStopped, ChildFailed, P.MalformedReply):  # it ends with the set's close either way
                pass


def _failure(exc: Exception, compiled: bool) -> str:
    what = "torch.compile's" if compiled else "the second reference's"
    if isinstance(exc, ChildFailed):
        return f"{what} process failed while timed: {exc.failed.message}"[:2000]
    return f"{what} process stopped while timed ({exc})"


def _how(paired: PairedReferences) -> dict[str, Any]:
    """How the baselines were timed, from the timing record every evaluation keeps."""
    assert paired.timed is not None and paired.reading is not None
    record = timing_record(paired.timed, paired.reading)
    kept = {k: record[k] for k in ("clock", "batch_size", "batches", "calls_per_model", "process_sets",
                                   "timed_outputs_checked")}
    return {"protocol": HOW_TIMED, **kept, "precision_settings": paired.settings, "noise_floor_ci": None if paired.reading.noise_floor is None else
            [round(v, 4) for v in paired.reading.noise_floor], "noise": [f.message for f in paired.reading.noise]}
