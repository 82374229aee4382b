"""The conversation with the candidate's process (runs in the parent): load -> the trials -> (where nothing is
timed) the knock-out and census calls -> the timing, against the reference's own processes -> finish.

Each step reads what was heard so far and returns what is heard after it (`Heard`, immutable); a failure the child
reports (`ChildFailed`) or a process that stops answering (`ChildStopped`) ends the conversation where it stood.
Each step after the trials runs only while the correctness gates pass: nothing is timed that is decided. The
knock-out, the kernels' clocked share and the census are audit batches among the timed calls
(harness/audits/); where nothing is timed, the knock-out and the census are calls of their own
after the trials."""

from __future__ import annotations

import random
import secrets
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from harness.child import job as J
from harness.decision.facts import Facts
from harness.decision.gates import CORRECTNESS, decide
from harness.audits import census as C
from harness.audits.knockout import Knockout
from harness.gathering.outputs import closeness, compared, saved_outputs
from harness.gathering.process_sets import Peers, answered, process_count, time_sets
from harness.isolation import protocol as P
from harness.isolation.session import ChildSession, ChildStopped
from harness.isolation.timing_slot import checking_slot
from harness.measurement.frozen_calls import FrozenSide, SideFailure, slot_count
from harness.measurement.frozen_trials import run_trials
from harness.policy import EvalPolicy
from harness.records import Verdict
from harness.verification.reference import ReferenceRun

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Talk:
    """What the conversation works with: the processes, the reference, the rules. `side`: the candidate's input
    slots where the parent makes its calls; `seconds`: how long its phases took, written as they end."""

    session: ChildSession
    reference: ReferenceRun | None
    policy: EvalPolicy
    job: J.ChildJob
    scratch: Path
    peers: Peers
    side: FrozenSide | None
    canaries: Future[list[str]] | None
    say: Progress
    seconds: dict[str, float] = field(default_factory=dict)

    def degenerate(self) -> list[str] | None:
        """The canaries that pass every trial (waits for their check); None where they were not checked."""
        return self.canaries.result() if self.canaries is not None else None


@dataclass(frozen=True)
class Heard:
    """What the conversation found so far; `over`: it ended (finished, or the child failed or stopped)."""

    facts: Facts
    loaded: int | None = None  # the candidate's cgroup's processes once it loaded
    knockout_call: bool = False  # the knock-out ran as a call of its own: its output is a file
    failure: P.Failed | None = None  # the child's own failure report
    stopped: str | None = None  # why the parent stopped hearing it (died, timed out, broke the channel)
    phase: str | None = None  # what the parent was driving when it ended ("correctness")
    over: bool = False

    def with_facts(self, **found: Any) -> Heard:
        return replace(self, facts=replace(self.facts, **found))


Step = Callable[[Talk, Heard], Heard]


def converse(talk: Talk, facts: Facts) -> Heard:
    """Every step in turn, until one ends the conversation."""
    heard = Heard(facts)
    for phase, step in _STEPS:
        try:
            heard = step(talk, heard)
        except P.ChildFailed as failed:
            return replace(heard, failure=failed.failed, phase=phase, over=True)
        except ChildStopped as stop:
            return replace(heard, stopped=str(stop), phase=phase, over=True)
        if heard.over:
            break
    return heard


def _load(talk: Talk, heard: Heard) -> Heard:
    answered(talk.session, P.Load())
    loaded = process_count(talk.session)  # (before the load the jail's own processes are still being made)
    if talk.reference is None:  # compile-only: nothing runs
        return _finish(talk, replace(heard, loaded=loaded))
    return replace(heard, loaded=loaded)


def _parent_trials(talk: Talk, heard: Heard) -> Heard:
    """The trials through the candidate's input slots, as every timed call is made
    (harness/measurement/frozen_trials.py); a broken protocol is a fact, a reported failure ends the talk."""
    if talk.side is None or talk.reference is None:
        return heard
    started = time.perf_counter()
    try:
        with checking_slot(heard.facts.device):
            talk.side.prepare(slot_count(talk.reference.trial_inputs[0]))
            checked = run_trials(talk.side, talk.reference.trial_inputs, random.Random(secrets.randbits(31)),
                                 talk.reference.mutates_inputs)
    except SideFailure as exc:
        return heard.with_facts(protocol_broken=str(exc))
    finally:
        talk.session.thaw()
        talk.seconds["correctness"] = time.perf_counter() - started
    return _compared(talk, heard.with_facts(checked=checked), checked.outputs)


def _child_trials(talk: Talk, heard: Heard) -> Heard:
    """CUDA, or no freezer here: the child runs the trials and saves their outputs."""
    if talk.side is not None:
        return heard
    answered(talk.session, P.Correctness())
    outputs, unreadable = saved_outputs(talk.scratch / J.OUTPUTS_FILE)
    if outputs is None:
        return heard.with_facts(unreadable=unreadable)
    return _compared(talk, heard, outputs)


def _compared(talk: Talk, heard: Heard, outputs: Any) -> Heard:
    assert talk.reference is not None
    heard = heard.with_facts(**compared(outputs, talk.reference, talk.policy))
    comparisons = heard.facts.comparisons
    if comparisons is None or not all(c.trial.passed for c in comparisons):
        return heard
    return heard.with_facts(**closeness(outputs, talk.reference, talk.policy, heard.facts.checked is not None))


def _still_correct(talk: Talk, heard: Heard) -> Heard:
    """The correctness gates decide whether anything more is asked."""
    if decide(heard.facts, talk.policy, CORRECTNESS).verdict is Verdict.ACCEPTED:
        return heard
    return _finish(talk, heard)


def _knockout_call(talk: Talk, heard: Heard) -> Heard:
    """Nothing timed: one call of its own with every kernel function poisoned (compared once the child is done)."""
    reference = talk.reference
    if talk.peers.ref is not None or not Knockout().runs(talk.policy, talk.job.device):
        return heard
    assert reference is not None
    answered(talk.session, _slot_command(P.Knockout, talk, reference.knockout_inputs or reference.trial_inputs[0]))
    return replace(heard, knockout_call=True).with_facts(knockout_matched=False)


def _census_call(talk: Talk, heard: Heard) -> Heard:
    """Nothing timed: one call of its own under the compute census."""
    policy, reference = talk.policy, talk.reference
    if talk.peers.ref is not None or not policy.hardening or policy.static_policy == "off":
        return heard
    assert reference is not None
    found = answered(talk.session, _slot_command(P.Census, talk, reference.trial_inputs[0]))
    return heard.with_facts(census=None if found is None else C.of_its_own(found.census))


def _timing(talk: Talk, heard: Heard) -> Heard:
    """Against the reference's own processes; never for a degenerate problem (its speedup would mean nothing)."""
    if talk.peers.ref is None or talk.degenerate():
        return heard
    assert talk.reference is not None
    talk.say("timing reference and candidate, each in its own process")
    timed = time_sets(talk.session, talk.peers, talk.reference, talk.policy, talk.job, talk.scratch, talk.side)
    talk.seconds["timing_wait"] = timed.slot_wait_s
    return heard.with_facts(timed=timed, knockout_matched=timed.audited.knocked_out_right,
                            census=C.among_timed(timed.audited) or heard.facts.census)


def _processes(talk: Talk, heard: Heard) -> Heard:
    ended = process_count(talk.session)
    return heard.with_facts(processes=(heard.loaded, ended) if heard.loaded and ended else None)


def _finish(talk: Talk, heard: Heard) -> Heard:
    answered(talk.session, P.Finish())
    return replace(heard, over=True)


def _slot_command(kind: type[P.Knockout] | type[P.Census], talk: Talk, inputs: list[Any]) -> P.Knockout | P.Census:
    """`kind` on `inputs`, written by the parent into input slot 0 (frozen) where it makes the calls: they were
    never in the candidate's folder."""
    if talk.side is None or not talk.side.slots:
        return kind()
    talk.session.freeze()
    try:
        talk.side.write(0, inputs)
    finally:
        talk.session.thaw()
    return kind(slot=0)


# In order; the phase names what the parent was driving, where a step's calls all look alike to the child.
_STEPS: tuple[tuple[str | None, Step], ...] = (
    (None, _load), ("correctness", _parent_trials), (None, _child_trials), (None, _still_correct),
    (None, _knockout_call), (None, _census_call), (None, _timing), (None, _processes), (None, _finish))
