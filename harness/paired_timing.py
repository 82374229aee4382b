"""Reference and candidate processes timed against each other (shared by the pipeline and the baselines): the
reference's own timing session, the input slots the parent writes where it makes the calls, and one timed set of
processes on the device's timing slot."""

from __future__ import annotations

import secrets
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from harness.child import job as J
from harness.child.child_run import forkable, limits_for
from harness.child.scratch import save_inputs, scratch_folder
from harness.isolation import protocol as P
from harness.isolation.session import ChildSession, ChildStopped
from harness.isolation.shared_slots import SharedSlots
from harness.isolation.timing_slot import timing_slot
from harness.measurement.frozen_calls import FrozenSide, slot_count
from harness.isolation.protocol import ChildFailed
from harness.measurement.timed_calls import Timing, TimedRun, TimingProtocolError
from harness.policy import EvalPolicy
from harness.records import Check, Finding
from harness.values.precision import settings_differences
from harness.verification.reference import ReferenceRun
from kernelbench.problem import Problem, ProblemError

REFERENCE_ONLY = "# the reference's timing process: no candidate code\n"


@contextmanager
def reference_session(problem: Problem, reference: ReferenceRun, job: J.ChildJob,
                       policy: EvalPolicy) -> Iterator[ChildSession]:
    """The reference's timing child gets its own scratch folder: it never sees candidate code or files. Where the
    parent writes every timed input, the trials' inputs are not saved for it (it never reads them; saving and
    loading them cost every set of processes 2 x 5 trials' inputs)."""
    with scratch_folder(problem, REFERENCE_ONLY, job) as ref_scratch:
        save_inputs(ref_scratch, reference, parent_calls=parent_calls(job, policy))
        with ExitStack() as slots:
            ref = ChildSession(ref_scratch, limits_for(job.device, policy), "reference", forkable=forkable(job.device),
                               shared=shared_slots(slots, reference, job, policy))
            try:
                yield ref
            finally:
                ref.close()


def parent_calls(job: J.ChildJob, policy: EvalPolicy) -> bool:
    """Whether the parent makes the candidate's calls through its input slots (the CPU, where the children can be
    frozen and read), trials included; elsewhere the child runs the trials from its folder and stages its inputs."""
    return job.pool_seed is None and not policy.skip_timing


def shared_slots(stack: ExitStack, reference: ReferenceRun | None, job: J.ChildJob,
                  policy: EvalPolicy) -> SharedSlots | None:
    """A timed child's input slots in a file the parent maps too (closed with `stack`), where the parent will
    write every timed input itself; None where the children stage their own (their job carries a pool seed)."""
    if reference is None or not parent_calls(job, policy):
        return None
    shared = SharedSlots(reference.trial_inputs[0], slot_count(reference.trial_inputs[0]))
    stack.callback(shared.close)
    return shared


def time_both(session: ChildSession, ref: ChildSession, reference: ReferenceRun, policy: EvalPolicy,
               job: J.ChildJob, scratch: Path, checked: FrozenSide | None = None,
               copy: ChildSession | None = None, planned: int | None = None, audits: bool = True) -> TimedRun:
    """The reference's children load before the device's timing slot is taken: the slot only covers measuring.
    `audits`: the knock-out and the kernels' clocked share among the timed calls (off for reference against
    reference, as the baselines are timed)."""
    references = (ref,) if copy is None else (ref, copy)
    for child in references:
        child.clock_from_now()  # it waited for the candidate: its run clock starts with its own work
    try:
        timing = Timing(ref, session, reference, policy, job.device, scratch, job.pool_seed, secrets.randbits(31),
                        checked, copy, audits)
    except TimingProtocolError as exc:
        raise ProblemError(f"timing cannot run here: {exc}") from None
    timing.planned = planned
    timing.run.pids = tuple(child.proc.pid for child in (ref, session, copy) if child is not None)
    try:
        loads = [_loaded(child) for child in references]
        unequal = next((d for d in (settings_differences(reference.settings, loaded.settings)
                                    for loaded in loads) if d), None)
        if unequal:
            raise ProblemError(f"[precision] the reference's timing process runs with other precision settings than "
                               f"the reference outputs were computed with ({'; '.join(unequal)}): timing refused")
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
        timing.run.failures.append(Finding(Check.TIMING, f"the candidate's process broke the timing protocol: {exc}"))
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


def _loaded(child: ChildSession) -> P.Status:
    """`load` in a reference's timing process: ProblemError where it fails (the machine's doing: no candidate code
    runs there)."""
    try:
        return child.request(P.Load())
    except (ChildFailed, P.MalformedReply):
        raise ProblemError("the reference failed to load in its timing process") from None


def set_policy(policy: EvalPolicy, sets: int) -> EvalPolicy:
    """One set's share of the timing: the budget, the call counts and the checks split across the sets (their sum is
    what one set had alone), at least 3 batches each, and the precision one set must reach for their mean to reach
    `timing_precision`."""
    if sets == 1:
        return policy
    return policy.model_copy(update={
        "timing_budget_s": policy.timing_budget_s / sets, "timing_precision": policy.timing_precision * sets ** 0.5,
        "min_timed_calls": max(3, -(-policy.min_timed_calls // sets)),
        "max_timed_calls": max(3, -(-policy.max_timed_calls // sets)),
        "timed_checks": -(-policy.timed_checks // sets), "timed_full_checks": -(-policy.timed_full_checks // sets)})
