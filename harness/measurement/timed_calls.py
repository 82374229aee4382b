"""Timing driven and clocked by the parent (runs in the parent).

The reference is timed in its own child that never loads candidate code, the candidate in its child, in alternating
batches, each on the parent's own `perf_counter_ns`: nothing in either child can touch that clock, and a batch only ends
when the child has synchronized the device. On the CPU the parent writes every call's inputs into the frozen child and
reads its outputs itself (`ParentSide`, harness/measurement/frozen_calls.py); on CUDA the child stages fresh inputs on
the device from the parent's recipes, times each call with CUDA events after an L2 flush, and is probed by request
(`StagingSide`). Every timed call is probed and a few are compared in full (`harness/measurement/timed_checks.py`). With
`timing_precision`, a discarded pilot predicts how many batches a precise speedup needs, so a steady kernel is not timed
for the whole budget; at least `timed_checks` calls still run (where they fit in 5x the budget), so the detection
probability does not shrink with the timing; where they do not fit, the verdict says how many were checked.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import statistics
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from harness.audits.among_timed import audits_for
from harness.audits.audit import Audit, Audited, added
from harness.defences import is_off
from harness.isolation import protocol as P
from harness.isolation.protocol import R
from harness.isolation.session import ChildSession
from harness.isolation.timing_slot import pin_thread
from harness.measurement.frozen_calls import FrozenSide, SideFailure, output_bound, slot_count
from harness.measurement.held_outputs import HeldOutputs
from harness.measurement.noise import Load, machine_load
from harness.measurement.timed_checks import (expected_output, full_check_failure, probe_positions, probes_agree,
                                              trial_tolerances)
from harness.measurement.timing import speedup_interval
from harness.policy import EvalPolicy
from harness.records import Check, Finding
from harness.values.fresh_inputs import draw_recipe, fresh_inputs, make_pools
from harness.values.integrity import flatten
from harness.values.tensors import nbytes
from harness.verification.compare import compare_trial
from harness.verification.reference import ReferenceRun


@dataclass
class TimedRun:
    ref_ms: list[float] = field(default_factory=list)
    candidate_ms: list[float] = field(default_factory=list)
    batch_size: int = 1
    overhead_ms: float = 0.0
    checked_calls: int = 0  # probed at secret positions against the reference's child
    full_checks: int = 0  # of those, compared in full with the parent's own reference
    pilot_batches: int = 0  # timed and discarded, to predict the batches a precise speedup needs
    pilot_half_width: float | None = None
    total_calls: int = 0
    failures: list[Finding] = field(default_factory=list)  # each decides (harness/decision/gates.py)
    slot_wait_s: float = 0.0  # waiting for the device's timing slot (another evaluation was being timed)
    frozen_builds: int = 0  # builds on this machine frozen while this run was timed (CPU)
    parent_reads: bool = False  # the parent wrote inputs and read outputs itself, the children frozen between
    kernel_calls: int | None = None  # the candidate's kernel calls while timed, where each `done` reported them
    candidate_calls: int = 0  # forward calls the candidate made while timed (warm-up and pilot included)
    ref_event_ms: list[float] = field(default_factory=list)  # CUDA: per batch, the median call's event time
    candidate_event_ms: list[float] = field(default_factory=list)
    copy_ms: list[float] = field(default_factory=list)  # a second reference process, timed in the same rotation
    copy_event_ms: list[float] = field(default_factory=list)  # (the A/A noise floor: harness/measurement/noise.py)
    held_checks: int = 0  # held outputs re-read after later batches (harness/measurement/held_outputs.py)
    load: tuple[Load, Load] | None = None  # the machine's own accounts, before and after timing
    pids: tuple[int, ...] = ()  # the processes timed: reference, candidate[, copy]
    sets: list["TimedRun"] = field(default_factory=list)  # the independent process sets combined here (`combined`)
    audited: Audited = field(default_factory=Audited)  # what the audit batches found (harness/audits/)


def combined(runs: list[TimedRun]) -> TimedRun:
    """One record of several independent process sets (`EvalPolicy.process_pairs`), each timed on its own share of
    the budget: their samples one after the other, their counts and failures added up, and the sets themselves in
    `sets`, from which harness/decision/timing_reading.py reads the spread between them."""
    first = runs[0]
    kernel_calls = [r.kernel_calls for r in runs if r.kernel_calls is not None]
    return TimedRun(
        ref_ms=[v for r in runs for v in r.ref_ms], candidate_ms=[v for r in runs for v in r.candidate_ms],
        batch_size=first.batch_size, overhead_ms=statistics.fmean(r.overhead_ms for r in runs),
        checked_calls=sum(r.checked_calls for r in runs), full_checks=sum(r.full_checks for r in runs),
        pilot_batches=sum(r.pilot_batches for r in runs), pilot_half_width=first.pilot_half_width,
        total_calls=sum(r.total_calls for r in runs), failures=[f for r in runs for f in r.failures],
        slot_wait_s=sum(r.slot_wait_s for r in runs), frozen_builds=sum(r.frozen_builds for r in runs),
        parent_reads=all(r.parent_reads for r in runs), kernel_calls=sum(kernel_calls) if kernel_calls else None,
        candidate_calls=sum(r.candidate_calls for r in runs),
        ref_event_ms=[v for r in runs for v in r.ref_event_ms],
        candidate_event_ms=[v for r in runs for v in r.candidate_event_ms],
        copy_ms=[v for r in runs for v in r.copy_ms], copy_event_ms=[v for r in runs for v in r.copy_event_ms],
        held_checks=sum(r.held_checks for r in runs),
        load=(first.load[0], runs[-1].load[1]) if first.load and runs[-1].load else first.load,
        pids=tuple(pid for r in runs for pid in r.pids), sets=list(runs), audited=added([r.audited for r in runs]))


_GO = P.Go()  # made once: nothing but its write is on the clock


class TimingProtocolError(Exception):
    """A child answered a timing command with something other than what was asked: its failure."""


def _read(command: P.Command[R] | type[P.Command[R]], reply: dict[str, Any], reference: bool) -> R:
    """The reply read as `command` declares (harness/isolation/protocol.py): ChildFailed, said of this side, where
    the child reported its own failure, TimingProtocolError where it answered anything else."""
    try:
        return P.read_reply(command, reply)
    except P.ChildFailed as failed:
        raise failed.on_side(reference) from None
    except P.MalformedReply as exc:
        raise TimingProtocolError(str(exc)) from None


def _ask(side: StagingSide, command: P.Command[R]) -> R:
    """`command` asked of a staging side's child, read as `_read` reads."""
    try:
        return side.session.request(command)
    except P.ChildFailed as failed:
        raise failed.on_side(side.reference) from None
    except P.MalformedReply as exc:
        raise TimingProtocolError(str(exc)) from None


class StagingSide:
    """A timed child that stages its own inputs (the CUDA device: inputs are made on the GPU from the parent's
    recipes, its outputs probed and packed by request). The CPU uses `FrozenSide`
    (harness/measurement/frozen_calls.py)."""

    frozen = False
    done: P.Done | None = None  # the last batch's reply

    def __init__(self, session: ChildSession, reference: bool, scratch: Path) -> None:
        self.session, self.reference, self.scratch = session, reference, scratch

    def batch_ns(self, calls: list[Any], values: list[list[Any]] | None, audit: P.Audit | None = None) -> int:
        _ask(self, P.Stage(calls))
        go = _GO if audit is None else P.Go(audit)
        elapsed, reply = self.session.timed(go)
        done = self.done = _read(go, reply, self.reference)
        if done.done != len(calls):
            raise TimingProtocolError("the child ran a different number of calls than staged")
        events = done.event_ms
        self.event_ms = events if events is not None and len(events) == len(calls) and calls else None
        return elapsed

    def last_event_ms(self) -> float | None:
        """The per-call CUDA event time of the last batch (the median of its calls), where the child sent it."""
        return statistics.median(self.event_ms) if getattr(self, "event_ms", None) else None

    def probe(self, mine: list[int], positions: list[list[int]]) -> Any:
        return _ask(self, P.Probe(mine, positions)).values

    def fetch(self, calls: list[int], name: str) -> list[Any] | None:
        _ask(self, P.Outputs(calls, name))
        try:
            import torch

            got = torch.load(self.scratch / name, weights_only=True)
            return got if isinstance(got, list) and len(got) == len(calls) else None
        except Exception:
            return None
        finally:
            (self.scratch / name).unlink(missing_ok=True)


class ParentSide:
    """`FrozenSide` seen through the same three methods as `StagingSide`."""

    frozen = True
    done: P.Done | None = None  # the last batch's reply

    def __init__(self, side: FrozenSide) -> None:
        self.side, self.reference = side, side.reference
        self.kernel_calls = 0  # in the last batch, as the child's `done` said

    def batch_ns(self, calls: list[Any], values: list[list[Any]] | None, audit: P.Audit | None = None) -> int:
        try:
            elapsed, reply = self.side.batch(values or [], audit)
        except SideFailure as exc:
            raise TimingProtocolError(str(exc)) from None
        done = self.done = _read(P.Run, reply, self.reference)
        if done.done != len(calls):
            raise TimingProtocolError("the child ran a different number of calls than sent")
        self.kernel_calls = done.kernel_calls or 0
        return elapsed

    def probe(self, mine: list[int], positions: list[list[int]]) -> Any:
        return self.side.probe(mine, positions)

    def fetch(self, calls: list[int], name: str) -> list[Any] | None:
        return [self.side.fetch(call) for call in calls]

    def last_event_ms(self) -> float | None:
        return None


Side = StagingSide | ParentSide


@contextmanager
def _on_cpus(cpus: str | None) -> Iterator[None]:
    """This thread on the timed children's CPUs while it writes their inputs: the inputs then sit in the caches
    of the core that runs the call, as when a program's previous op just wrote them (written from another core,
    every call paid for fetching them, and honest speedups moved toward 1)."""
    me = threading.get_native_id()
    # outside this process's cpuset (None): the writes still land, only colder
    before = pin_thread(me, {int(cpu) for cpu in cpus.split(",")}) if cpus and hasattr(os, "sched_setaffinity") \
        else None
    try:
        yield
    finally:
        if before:
            pin_thread(me, before)


def _sizes(policy: EvalPolicy, ref_ms: float, cand_ms: float, bytes_per_call: int, most: int) -> tuple[int, int]:
    """(batch size, batches): about `timing_budget_s` per model, batches long enough to dwarf the pipe."""
    per_round = max(ref_ms + cand_ms, 1e-4)
    calls = max(policy.min_timed_calls, min(policy.max_timed_calls, int(policy.timing_budget_s * 2000 / per_round)))
    batch = math.ceil(policy.batch_target_ms / max(min(ref_ms, cand_ms), 1e-4))
    batch = max(1, min(batch, most, max(1, (256 << 20) // max(bytes_per_call, 1)), calls // policy.min_timed_calls or 1))
    return batch, max(policy.min_timed_calls, math.ceil(calls / batch))


class Timing:
    """Alternating batches of reference and candidate, each in its own child, on the parent's clock. On the CPU
    (`frozen`) the parent writes every call's inputs and reads every call's outputs itself, probing all of them;
    on CUDA the children stage and probe (see StagingSide)."""

    def __init__(self, ref: ChildSession, cand: ChildSession, reference: ReferenceRun, policy: EvalPolicy,
                 device: str, scratch: Path, pool_seed: int | None, seed: int,
                 checked: FrozenSide | None = None, copy: ChildSession | None = None, audits: bool = True) -> None:
        """`checked`: the candidate's side that already ran the correctness trials (its slots stay); `copy`: a
        second reference process, timed like the other two on the same inputs (never checked: the A/A floor);
        `audits`: the knock-out and the kernels' own time among the timed calls (a candidate with kernels)."""
        self.reference, self.policy, self.device = reference, policy, device
        self.audits = audits_for(policy, device) if audits else []  # one batch each (harness/audits/)
        self.frozen = pool_seed is None  # the job gave the children no pool: the parent writes every input
        self.cpus = ref.jailed.limits.cpus if self.frozen else None
        if self.frozen:
            most = output_bound(reference.outputs[0])
            try:
                self.ref: Side = ParentSide(FrozenSide(ref, True, most))
                self.cand: Side = ParentSide(checked or FrozenSide(cand, False, most))
                self.copy: Side | None = ParentSide(FrozenSide(copy, True, most)) if copy is not None else None
            except SideFailure as exc:
                raise TimingProtocolError(str(exc)) from None
        else:
            self.ref, self.cand = StagingSide(ref, True, scratch), StagingSide(cand, False, scratch)
            self.copy = StagingSide(copy, True, scratch) if copy is not None else None
        self.sides: list[Side] = [self.ref, self.cand] + ([self.copy] if self.copy is not None else [])
        self.orders = list(itertools.permutations(self.sides))  # every order in turn: nobody always runs first
        self.rng = random.Random(seed)
        self.timed_trials = [t for t, name in enumerate(reference.distributions) if name == "default"] or \
            list(range(len(reference.trial_inputs)))
        # on the CPU the pools never leave the parent: nothing in either child can derive the next call's values
        self.pools = make_pools(reference.trial_inputs[0], seed ^ 0x5EED if pool_seed is None else pool_seed)
        self.tolerances = trial_tolerances(reference, policy)
        self.full: set[int] = set()  # timed calls (by index) compared in full, drawn in measure()
        self.run = TimedRun(parent_reads=self.frozen)
        self.values: list[list[Any]] | None = None  # the current batch's inputs (CPU), written to both children
        self.planned: int | None = None  # batches an earlier set's pilot predicted: no pilot of its own

    def recipes(self, count: int) -> list[Any]:
        """Fresh calls on the problem's own input distribution: the trials that reshape it (spiky, heavy-tailed,
        large) are for correctness; timed on them, a kernel with value-dependent paths (erf, exp) ran 15-25%
        slower than on the inputs its users send."""
        trials = self.timed_trials
        calls = [[t, draw_recipe(self.rng, self.reference.trial_inputs[t])]
                 for t in (trials[self.rng.randrange(len(trials))] for _ in range(count))]
        self.values = [fresh_inputs(self.reference.trial_inputs[t], self.pools, recipe, "cpu")
                       for t, recipe in calls] if self.frozen else None
        return calls

    def _batch_ms(self, side: Side, calls: list[Any], overhead_ns: float, audit: P.Audit | None = None) -> float:
        elapsed = side.batch_ns(calls, self.values, audit)
        if side is self.cand and isinstance(side, ParentSide):
            self.run.kernel_calls = (self.run.kernel_calls or 0) + side.kernel_calls
            self.run.candidate_calls += len(calls)
        return max(elapsed - overhead_ns, 1.0) / max(len(calls), 1) / 1e6

    def measure(self) -> TimedRun:
        before = machine_load()
        try:
            with _on_cpus(self.cpus if self.frozen else None):
                return self._measure()
        finally:
            self.run.load = (before, machine_load())

    def _measure(self) -> TimedRun:
        per_call = nbytes(self.reference.trial_inputs[0]) + nbytes(flatten(self.reference.outputs[0]))
        if self.frozen:
            for side in self.sides:
                try:
                    side.side.prepare(slot_count(self.reference.trial_inputs[0]))
                except P.ChildFailed as failed:
                    raise failed.on_side(side.reference) from None
                except SideFailure as exc:
                    raise TimingProtocolError(str(exc)) from None
        self.recipes(0)
        overhead = float(statistics.median(self.ref.batch_ns([], self.values) for _ in range(15)))
        self.run.overhead_ms = overhead / 1e6
        most = slot_count(self.reference.trial_inputs[0]) if self.frozen else 64
        warm = {}
        for s in self.sides:  # the second round sizes the batches: the first pays for first touches
            warm[s] = min(self._batch_ms(s, self.recipes(min(self.policy.warmup_calls, most)), overhead)
                          for _ in range(2))
        copy_ms = warm[self.copy] if self.copy is not None else 0.0  # the copy shares the budget, never adds to it
        batch, batches = _sizes(self.policy, warm[self.ref] + copy_ms, warm[self.cand], per_call, most)
        batches = self._batches_needed(batch, batches, overhead)
        if self.policy.hardening:  # enough calls for the checks' claim, however few the speedup needs
            floor = math.ceil(self.policy.timed_checks / batch)
            affordable = int(5 * self.policy.timing_budget_s * 1000 / max(sum(warm.values()) * batch, 1e-6))
            batches = max(batches, min(floor, affordable))
        total = batch * batches
        checked = set(range(total)) if self.policy.hardening else set()  # every timed call is probed
        self.full = set(self.rng.sample(sorted(checked), min(len(checked), self._full_checks())))
        self.run.batch_size, self.run.total_calls, self.run.checked_calls = batch, total, len(checked)
        held = HeldOutputs(self.cand.side, self.rng, batches) if self.frozen and checked and \
            not is_off("held_outputs") else None
        audits = self._audit_positions(batches)
        timed = 0
        for position in range(batches + len(audits)):
            if position in audits:
                done = self._audit(audits[position], position, batch, overhead, timed, held)
            else:
                done = self._timed_batch(timed, position, batch, overhead, checked, held)
                timed += 1
            if not done:
                return self.run
        self.run.held_checks = held.checked if held else 0
        return self.run

    def _timed_batch(self, index: int, position: int, batch: int, overhead: float, checked: set[int],
                     held: HeldOutputs | None) -> bool:
        """Timed batch `index` (the `position`-th of all batches): sampled, every call probed; False on a
        failure (in the run)."""
        calls = self.recipes(batch)
        mine = [i for i in range(batch) if index * batch + i in checked]
        positions = probe_positions(self.rng, len(mine))
        probed: dict[bool, Any] = {}
        for side in self._order(position):
            sample = self._batch_ms(side, calls, overhead)
            self._samples(side, False).append(sample)
            event = side.last_event_ms()
            if event is not None:
                self._samples(side, True).append(event)
            if side is self.copy:
                continue
            if mine and not self.frozen:  # right after `done`, before anything else runs
                probed[side is self.ref] = side.probe(mine, positions)
        if mine and self.frozen:  # both frozen since their `done`: nothing in either has run since
            probed = {True: self.ref.probe(mine, positions), False: self.cand.probe(mine, positions)}
        if mine and not self._check(index, calls, mine, positions, probed[False], probed[True]):
            return False
        return self._after_batch(held, index, index * batch, mine, positions, probed.get(False))

    def _after_batch(self, held: HeldOutputs | None, index: int, first_call: int, mine: list[int],
                     positions: list[list[int]], probed: Any) -> bool:
        if held is None:
            return True
        failure = held.after_batch(index, first_call, mine, positions, probed)
        if failure:
            self.run.failures.append(failure)
            return False
        self._hold_alike(self.cand.side)
        return True

    # -- audits: batches made exactly like the timed ones, at positions only the parent drew, never sampled ----

    def _audit_positions(self, batches: int) -> dict[int, Audit]:
        """Where among the timed batches each audit batch goes (drawn here, in the parent, after the batch count is
        fixed: no count of calls tells the candidate which call is audited)."""
        return dict(zip(self.rng.sample(range(batches + len(self.audits)), len(self.audits)), self.audits))

    def _audit(self, audit: Audit, position: int, batch: int, overhead: float, timed: int,
               held: HeldOutputs | None) -> bool:
        """One batch like every timed one (fresh inputs, every side, every call probed but an audited one), its
        samples not kept; the candidate's batch asked what `audit` asks, its reply read as the audit reads it."""
        calls = self.recipes(batch)
        asked = audit.ask(self.rng.randrange, batch)
        mine = [i for i in range(batch) if i != asked.poison]
        positions = probe_positions(self.rng, len(mine))
        probed: dict[bool, Any] = {}
        for side in self._order(position):
            ours = side is self.cand
            ms = self._batch_ms(side, calls, overhead, asked if ours else None)
            if ours:
                self.run.audited = audit.read(self.run.audited, side.done, int(ms * batch * 1e6), len(calls))
            if mine and not self.frozen and side is not self.copy:
                probed[side is self.ref] = side.probe(mine, positions)
        if mine and self.frozen:
            probed = {True: self.ref.probe(mine, positions), False: self.cand.probe(mine, positions)}
        if mine and not self._check(None, calls, mine, positions, probed[False], probed[True]):
            return False
        self.run.audited = audit.judged(self.run.audited, self.cand.done, asked,
                                        lambda call: self._still_right(calls[call], position, call))
        return self._after_batch(held, timed, timed * batch, [], [], None)

    def _still_right(self, call: Any, position: int, index: int) -> bool:
        """Whether audited call `index` of the batch (its recipe `call`) still returned the right answer."""
        got = self.cand.fetch([index], f"knockout_{position}.pt")
        if not got:
            return False
        trial, recipe = call
        expected = expected_output(self.reference, self.pools, trial, recipe, self.device)
        return compare_trial(self.reference.trial_seeds[trial], expected, got[0], self.policy).passed

    def _hold_alike(self, checked: FrozenSide) -> None:
        """The reference's processes keep the same calls' outputs as the candidate's: holding memory costs page
        faults in a process whose heap has not grown yet (a fresh set's candidate read 0.6-0.9x against its own
        reference where only it held), and what the check costs must not be charged to the candidate alone."""
        for side in (self.ref, self.copy):
            if isinstance(side, ParentSide):
                side.side.to_hold, side.side.to_release = list(checked.to_hold), list(checked.to_release)

    def _full_checks(self) -> int:
        """timed_full_checks, but no more than 512 MB of outputs compared in full (at least 2): a full check
        reads, recomputes and compares the whole output, 3 s per call for 256 MB on a CPU, while the probes on
        every call cost the same whatever the size."""
        output = max(nbytes(flatten(self.reference.outputs[0])), 1)
        return min(self.policy.timed_full_checks, max(2, (512 << 20) // output))

    def _order(self, batch_index: int) -> tuple[Side, ...]:
        """Who goes first (and, with the copy, second) rotates through every order, so no process always runs
        on caches another warmed or evicted."""
        return self.orders[batch_index % len(self.orders)]

    def _samples(self, side: Side, events: bool) -> list[float]:
        run = self.run
        if side is self.ref:
            return run.ref_event_ms if events else run.ref_ms
        if side is self.copy:
            return run.copy_event_ms if events else run.copy_ms
        return run.candidate_event_ms if events else run.candidate_ms

    def _batches_needed(self, batch: int, most: int, overhead: float) -> int:
        """Batches for a ±timing_precision interval of the speedup, predicted from a pilot of min_timed_calls
        batches whose samples are discarded (its calls are unchecked, so they must not count): the interval
        narrows as 1/sqrt(batches)."""
        pilot = self.policy.min_timed_calls
        if self.planned:  # another set of processes of this evaluation ran the pilot
            return min(most, max(self.planned, pilot))
        if not self.policy.timing_precision or most < 2 * pilot:
            return most
        ref, cand = [], []
        for index in range(pilot):
            calls = self.recipes(batch)
            for side in self._order(index):
                sample = self._batch_ms(side, calls, overhead)
                if side is not self.copy:
                    (ref if side is self.ref else cand).append(sample)
        low, high = speedup_interval(ref, cand, resamples=200)
        half_width = (high - low) / 2 / max(statistics.median(ref) / max(statistics.median(cand), 1e-12), 1e-12)
        needed = math.ceil(pilot * (half_width / self.policy.timing_precision) ** 2)
        self.run.pilot_batches, self.run.pilot_half_width = pilot, half_width
        return min(most, max(pilot, needed + needed % 2))

    def _check(self, batch_index: int | None, calls: list[Any], mine: list[int], positions: list[list[int]],
               probed: Any, expected: Any) -> bool:
        """Probed values against the reference child's; the full comparison for the chosen few and any that
        differ; on the CPU also where the outputs lie (aliasing) and whether the inputs were changed. An audit
        batch (`batch_index` None) is compared in full only where a probe differs."""
        if self.frozen:
            aliasing = self.cand.side.aliasing(len(calls))
            if aliasing:
                self.run.failures.extend(aliasing)
                return False
        if not isinstance(probed, list) or len(probed) != len(mine):
            probed = [None] * len(mine)
        first = -len(calls) if batch_index is None else batch_index * len(calls)  # (no audit call is in `full`)
        full = [k for k, call in enumerate(mine)
                if first + call in self.full
                or not probes_agree(probed[k], expected[k], self.tolerances[calls[call][0]])]
        if not full:
            return True
        got = self.cand.fetch([mine[k] for k in full], f"timed_{first}.pt")
        if got is None:
            self.run.failures.append(Finding(Check.TIMED_CHECK, "the outputs of timed calls could not be read back"))
            return False
        self.run.full_checks += len(full)
        for k, output in zip(full, got):
            label = f"timed call {first + mine[k]}" if batch_index is not None else "a timed call"
            if self.frozen and self.values is not None:
                changed = self.cand.side.inputs_changed(mine[k], self.values[mine[k]])
                if changed:
                    self.run.failures.append(Finding(
                        Check.MUTATION, f"{label}: forward() modified input(s) {changed} in place"))
                    return False
            failure = full_check_failure(self.reference, self.pools, self.policy, self.device, calls[mine[k]],
                                         output, positions[k], probed[k], label)
            if failure:
                self.run.failures.append(failure)
                return False
        return True
