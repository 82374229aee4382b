"""The timed process sets of one evaluation (runs in the parent): the first is the candidate's checked process
with the reference's processes started beside it; each further one is fresh, so the interval reads the spread
between processes, as a rerun would see it (harness/decision/timing_reading.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.child import job as J
from harness.child.child_run import build_service, forkable, limits_for
from harness.child.scratch import read_result, save_inputs, scratch_folder
from harness.child.verdicts import integrity_failures
from harness.defences import is_off
from harness.isolation import protocol as P
from harness.isolation.session import ChildSession
from harness.measurement.frozen_calls import FrozenSide
from harness.measurement.timed_calls import TimedRun, combined
from harness.paired_timing import parent_calls, reference_session, set_policy, shared_slots, time_both
from harness.policy import EvalPolicy
from harness.records import Check, Finding
from harness.verification.reference import ReferenceRun
from kernelbench.problem import Problem


@dataclass(frozen=True)
class ProcessSet:
    """A fresh set of timed processes: the candidate's (its own scratch folder, loading the cached build again),
    the reference's and, with `noise_floor`, the reference's copy; each with its own input slots (CPU)."""

    candidate: ChildSession
    scratch: Path
    ref: ChildSession
    copy: ChildSession | None


@dataclass(frozen=True)
class Peers:
    """The processes timed against the candidate's checked one (started while it builds), and how to start more
    sets; `ref` None: nothing is timed."""

    ref: ChildSession | None = None
    copy: ChildSession | None = None  # a second reference process: the A/A noise floor
    more_sets: Callable[[ExitStack], ProcessSet] | None = None


def start_peers(problem: Problem, source: str, reference: ReferenceRun | None, job: J.ChildJob, policy: EvalPolicy,
                stack: ExitStack) -> Peers:
    """The reference's timing process (and its copy), started now so its interpreter starts while the candidate
    builds and runs; none where nothing is timed."""
    if reference is None or policy.skip_timing:
        return Peers()
    ref = stack.enter_context(reference_session(problem, reference, job, policy))
    copy = stack.enter_context(reference_session(problem, reference, job, policy)) if policy.noise_floor else None
    return Peers(ref, copy, lambda sets: process_set(problem, source, reference, job, policy, sets))


def process_set(problem: Problem, source: str, reference: ReferenceRun, job: J.ChildJob, policy: EvalPolicy,
                stack: ExitStack) -> ProcessSet:
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
    return ProcessSet(candidate, scratch, ref, copy)


def time_sets(session: ChildSession, peers: Peers, reference: ReferenceRun, policy: EvalPolicy, job: J.ChildJob,
              scratch: Path, checked: FrozenSide | None) -> TimedRun:
    """`process_pairs` independent sets of timed processes, one after the other, each on its share of the budget
    (`set_policy`, harness/paired_timing.py). The fresh candidates load together before any set is timed (their
    imports overlap; none loads while another set is timed). ChildFailed where a candidate fails."""
    sets = policy.process_pairs if peers.more_sets is not None else 1
    share = set_policy(policy, sets)
    assert peers.ref is not None
    with ExitStack() as stack:
        fresh = [peers.more_sets(stack) for _ in range(sets - 1)] if peers.more_sets is not None else []
        _load_all([one.candidate for one in fresh])
        runs = [time_both(session, peers.ref, reference, share, job, scratch, checked, peers.copy)]
        planned = len(runs[0].ref_ms) if runs[0].pilot_batches else None  # its pilot's prediction serves every set
        for one in fresh:
            if runs[-1].failures:
                break
            runs.append(_time_fresh_set(one, reference, share, job, planned))
    return combined(runs)


def answered(session: ChildSession, command: P.Command[P.R]) -> P.R | None:
    """`command`'s reply, or None where the child answered something else: the conversation goes on (how the child
    ended is read from its result file). ChildFailed where it reported its own failure."""
    try:
        return session.request(command)
    except P.MalformedReply:
        return None


def process_count(session: ChildSession) -> int | None:
    """How many processes the candidate's cgroup holds now (None where there is no cgroup to count in)."""
    if is_off("processes"):
        return None
    return len(session.jailed.group.pids()) or None


def _load_all(candidates: list[ChildSession]) -> None:
    """`load` in every fresh candidate process at once; a candidate that fails to load fails the evaluation."""
    if not candidates:
        return
    with ThreadPoolExecutor(max_workers=len(candidates), thread_name_prefix="kernelwright-load") as pool:
        list(pool.map(lambda candidate: answered(candidate, P.Load()), candidates))  # ChildFailed where one fails


def _time_fresh_set(fresh: ProcessSet, reference: ReferenceRun, policy: EvalPolicy, job: J.ChildJob,
                    planned: int | None) -> TimedRun:
    """One fresh set timed with every check of the first set (probes, full checks, held outputs, aliasing,
    mutation), then finished, what its candidate observed in itself (replaced functions, threads) a failure of the
    timing like any other. A candidate that fails here fails the evaluation (ChildFailed)."""
    loaded = process_count(fresh.candidate)  # (loaded already, beside the other fresh sets, by `_load_all`)
    timed = time_both(fresh.candidate, fresh.ref, reference, policy, job, fresh.scratch, None, fresh.copy,
                      planned)
    if timed.failures:
        return timed
    ended = process_count(fresh.candidate)
    if loaded and ended and ended > loaded and policy.hardening:
        timed.failures.append(Finding(
            Check.PROCESSES, f"a fresh process of the candidate grew from {loaded} to {ended} "
            "processes while timed: a process it started was still running"))
        return timed
    answered(fresh.candidate, P.Finish())
    result = read_result(fresh.scratch)
    if result is None:
        timed.failures.append(Finding(Check.TIMING, "a fresh process of the candidate, timed as another set, left no "
                                      "result"))
    else:
        timed.failures += integrity_failures(result, reference, policy, job.device)
    return timed
