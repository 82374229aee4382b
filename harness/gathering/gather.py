"""`gather`: every process of one evaluation started, talked to and closed, and what happened handed back as one
immutable `Facts` (runs in the parent; harness/decision/ decides from it)."""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from harness.child import job as J
from harness.child.child_run import build_service, forkable, limits_for
from harness.child.scratch import read_result, save_inputs, scratch_folder, scratch_full
from harness.child.verdicts import log_tail, read_events
from harness.decision.facts import ChildFacts, Facts
from harness.decision.gates import CORRECTNESS, decide
from harness.feedback.nvml import telemetry_flags
from harness.gathering.conversation import Heard, Progress, Talk, converse
from harness.audits.knockout import still_right
from harness.gathering.process_sets import start_peers
from harness.isolation.sandbox import ChildOutcome
from harness.isolation.scratch_quota import is_quota
from harness.isolation.session import ChildSession
from harness.measurement.frozen_calls import FrozenSide, output_bound, parent_driven
from harness.paired_timing import parent_calls, shared_slots
from harness.policy import EvalPolicy
from harness.records import Verdict
from harness.verification.canaries import passing_canaries
from harness.verification.reference import ReferenceRun, run_reference
from harness.verification.work_share import reference_flops
from kernelbench.problem import Problem

_BACKGROUND = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kernelwright-canaries")  # one per evaluation


def gather(problem: Problem, source: str, policy: EvalPolicy, facts: Facts, say: Progress) -> Facts:
    """The reference computed, the canaries checked in the background, the candidate's process built, checked and
    timed against the reference's own processes: `facts` (the static check's) completed with all of it."""
    device = facts.device
    job = J.ChildJob(mode="evaluate", device=device, policy=policy,  # a pool seed only where the children stage
                     pool_seed=None if parent_driven(device) else secrets.randbits(31))
    builds = build_service(device, policy)
    seconds: dict[str, float] = {}
    with scratch_folder(problem, source, job) as scratch, ExitStack() as stack:
        reference = None if device == "cuda-compile-only" else _reference(problem, policy, job, scratch, say, seconds)
        if reference is not None:
            facts = replace(facts, reference=reference, notes=facts.notes + reference.notes)
        canaries = _BACKGROUND.submit(passing_canaries, reference, policy, facts.canary_notes) \
            if reference is not None and policy.hardening else None
        peers = start_peers(problem, source, reference, job, policy, stack)
        say("building and running the candidate in an isolated process")
        session = ChildSession(scratch, limits_for(device, policy), "candidate", on_build=builds,
                               forkable=forkable(device), shared=shared_slots(stack, reference, job, policy))
        side = FrozenSide(session, False, output_bound(reference.outputs[0])) \
            if session.shared is not None and reference is not None else None
        talk = Talk(session, reference, policy, job, scratch, peers, side, canaries, say, seconds)
        try:
            heard = converse(talk, facts)
        finally:
            outcome = session.close()
        facts = _child_ended(heard, scratch, outcome, policy)
        facts = replace(facts, builds=builds.records, scratch_quota=is_quota(scratch), seconds=seconds,
                        limit=builds.limit_hit or scratch_full(scratch, job))
    if canaries is not None and decide(facts, policy, CORRECTNESS).verdict is Verdict.ACCEPTED:
        facts = replace(facts, degenerate=talk.degenerate())  # waits for the check, so its notes are complete
    return _with_work(facts, problem)


def _reference(problem: Problem, policy: EvalPolicy, job: J.ChildJob, scratch: Path, say: Progress,
               seconds: dict[str, float]) -> ReferenceRun:
    """The parent's own outputs on secret seeds, and the trials' inputs saved where the candidate's process reads
    them (where it runs the trials itself)."""
    say("computing reference outputs")
    started = time.perf_counter()
    seeds = [secrets.randbits(31) for _ in range(policy.trials)]
    reference = run_reference(problem, job.device, job.init_seed, seeds, policy.cpu_threads,
                              vary_distributions=policy.hardening)
    save_inputs(scratch, reference, parent_calls=parent_calls(job, policy))
    seconds["reference"] = time.perf_counter() - started
    return reference


def _child_ended(heard: Heard, scratch: Path, outcome: ChildOutcome, policy: EvalPolicy) -> Facts:
    """How the candidate's process ended, what it reported, and the knock-out's output it left behind."""
    facts, result = heard.facts, read_result(scratch)
    child = ChildFacts(outcome, result, read_events(scratch), log_tail(scratch) if result is None else "",
                       heard.stopped, heard.failure, heard.phase)
    facts = replace(facts, child=child)
    if result is not None and result.telemetry:
        flags = telemetry_flags(result.telemetry.get("before", {}), result.telemetry.get("after", {}))
        facts = replace(facts, notes=facts.notes + flags)
    knocked = scratch / J.KNOCKOUT_FILE
    if heard.knockout_call and knocked.exists() and facts.reference is not None:
        facts = replace(facts, knockout_matched=still_right(knocked, facts.reference, policy))
    return facts


def _with_work(facts: Facts, problem: Problem) -> Facts:
    """The reference's FLOPs, where the census counted the library's: the kernels' share of the work."""
    if facts.census and facts.census.get("flops"):
        return replace(facts, reference_flops=reference_flops(problem))
    return facts
