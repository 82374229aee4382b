"""Timing driven and clocked by the parent (runs in the parent).

The reference is timed in its own child that never loads candidate code, the candidate in its child, in
alternating batches. For each batch the parent has the child stage fresh inputs (untimed), then sends `go` and
reads `done` on its own `perf_counter_ns`: nothing in either child can touch that clock, and a batch only ends
when the child has synchronized the device. Checked calls are probed right after their batch and a few compared
in full (`harness/timed_checks.py`). With `timing_precision`, a discarded pilot predicts how many batches a precise
speedup needs, so a steady kernel is not timed for the whole budget; the checked calls are then drawn from the
calls that will actually run, so the number of checks does not shrink with the timing.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.fresh_inputs import draw_recipe, make_pools
from harness.integrity import flatten
from harness.policy import EvalPolicy
from harness.reference import ReferenceRun
from harness.session import ChildSession
from harness.timed_checks import full_check_failure, probe_positions, probes_agree, trial_tolerances
from harness.timing import speedup_interval


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
    failures: list[str] = field(default_factory=list)  # `[check] reason`, decisive
    slot_wait_s: float = 0.0  # waiting for the device's timing slot (another evaluation was being timed)
    frozen_builds: int = 0  # builds on this machine frozen while this run was timed (CPU)


class TimingProtocolError(Exception):
    """A child answered a timing command with something other than what was asked: its failure."""


class ChildFailed(Exception):
    """A child reported its own failure (the candidate's forward raised while being timed, say)."""

    def __init__(self, reply: dict[str, Any], reference: bool) -> None:
        super().__init__(str(reply.get("message", ""))[:200])
        self.reply = reply
        self.reference = reference


def _expect(reply: dict[str, Any], key: str, reference: bool = False) -> Any:
    if "failed" in reply:
        raise ChildFailed(reply, reference)
    if key not in reply:
        raise TimingProtocolError(f"unexpected reply {str(reply)[:200]}")
    return reply[key]


def _batch_ms(session: ChildSession, calls: list[Any], overhead_ns: float, reference: bool) -> float:
    _expect(session.request({"cmd": "stage", "calls": calls}), "staged", reference)
    elapsed, reply = session.timed({"cmd": "go"})
    if _expect(reply, "done", reference) != len(calls):
        raise TimingProtocolError("the child ran a different number of calls than staged")
    return max(elapsed - overhead_ns, 1.0) / max(len(calls), 1) / 1e6


def _sizes(policy: EvalPolicy, ref_ms: float, cand_ms: float, bytes_per_call: int) -> tuple[int, int]:
    """(batch size, batches): about `timing_budget_s` per model, batches long enough to dwarf the pipe."""
    per_round = max(ref_ms + cand_ms, 1e-4)
    calls = max(policy.min_timed_calls, min(policy.max_timed_calls, int(policy.timing_budget_s * 2000 / per_round)))
    batch = math.ceil(policy.batch_target_ms / max(min(ref_ms, cand_ms), 1e-4))
    batch = max(1, min(batch, 64, max(1, (256 << 20) // max(bytes_per_call, 1)), calls // policy.min_timed_calls or 1))
    return batch, max(policy.min_timed_calls, math.ceil(calls / batch))


def _bytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if hasattr(v, "element_size"))


class Timing:
    def __init__(self, ref: ChildSession, cand: ChildSession, reference: ReferenceRun, policy: EvalPolicy,
                 device: str, scratch: Path, pool_seed: int, seed: int) -> None:
        self.ref, self.cand, self.reference, self.policy = ref, cand, reference, policy
        self.device, self.scratch = device, scratch
        self.rng = random.Random(seed)
        self.pools = make_pools(reference.trial_inputs[0], pool_seed)
        self.tolerances = trial_tolerances(reference, policy)
        self.full: set[int] = set()  # timed calls (by index) compared in full, drawn in measure()
        self.run = TimedRun()

    def recipes(self, count: int) -> list[Any]:
        trials = len(self.reference.trial_inputs)
        return [[t, draw_recipe(self.rng, self.reference.trial_inputs[t])]
                for t in (self.rng.randrange(trials) for _ in range(count))]

    def measure(self) -> TimedRun:
        _expect(self.ref.request({"cmd": "stage", "calls": []}), "staged", reference=True)
        overhead = float(statistics.median(self.ref.timed({"cmd": "go"})[0] for _ in range(15)))
        self.run.overhead_ms = overhead / 1e6
        warm = {s: _batch_ms(s, self.recipes(self.policy.warmup_calls), overhead, s is self.ref)
                for s in (self.ref, self.cand)}
        output_bytes = _bytes(flatten(self.reference.outputs[0]))
        batch, batches = _sizes(self.policy, warm[self.ref], warm[self.cand],
                                _bytes(self.reference.trial_inputs[0]) + output_bytes)
        batches = self._batches_needed(batch, batches, overhead)
        total = batch * batches
        checked = set(self.rng.sample(range(total), min(total, self.policy.timed_checks))) \
            if self.policy.hardening else set()
        self.full = set(self.rng.sample(sorted(checked), min(len(checked), self.policy.timed_full_checks)))
        self.run.batch_size, self.run.total_calls, self.run.checked_calls = batch, total, len(checked)
        for index in range(batches):
            calls = self.recipes(batch)
            mine = [i for i in range(batch) if index * batch + i in checked]
            positions = probe_positions(self.rng, len(mine))
            probed: dict[bool, Any] = {}
            for session in self._order(index):
                sample = _batch_ms(session, calls, overhead, session is self.ref)
                (self.run.ref_ms if session is self.ref else self.run.candidate_ms).append(sample)
                if mine:  # right after `done`, before anything else runs
                    probed[session is self.ref] = self._probe(session, mine, positions)
            if mine and not self._check(index, calls, mine, positions, probed[False], probed[True]):
                return self.run
        return self.run

    def _order(self, batch_index: int) -> tuple[ChildSession, ChildSession]:
        """Who goes first alternates, so neither model always runs on caches the other warmed or evicted."""
        return (self.ref, self.cand) if batch_index % 2 == 0 else (self.cand, self.ref)

    def _batches_needed(self, batch: int, most: int, overhead: float) -> int:
        """Batches for a ±timing_precision interval of the speedup, predicted from a pilot of min_timed_calls
        batches whose samples are discarded (its calls are unchecked, so they must not count): the interval
        narrows as 1/sqrt(batches)."""
        pilot = self.policy.min_timed_calls
        if not self.policy.timing_precision or most < 2 * pilot:
            return most
        ref, cand = [], []
        for index in range(pilot):
            calls = self.recipes(batch)
            for session in self._order(index):
                (ref if session is self.ref else cand).append(_batch_ms(session, calls, overhead, session is self.ref))
        low, high = speedup_interval(ref, cand, resamples=200)
        half_width = (high - low) / 2 / max(statistics.median(ref) / max(statistics.median(cand), 1e-12), 1e-12)
        needed = math.ceil(pilot * (half_width / self.policy.timing_precision) ** 2)
        self.run.pilot_batches, self.run.pilot_half_width = pilot, half_width
        return min(most, max(pilot, needed + needed % 2))

    def _probe(self, session: ChildSession, mine: list[int], positions: list[list[int]]) -> Any:
        return _expect(session.request({"cmd": "probe", "calls": mine, "positions": positions}), "values",
                       session is self.ref)

    def _check(self, batch_index: int, calls: list[Any], mine: list[int], positions: list[list[int]],
               probed: Any, expected: Any) -> bool:
        """Probed values against the reference child's; the full comparison for the chosen few and any that
        differ."""
        if not isinstance(probed, list) or len(probed) != len(mine):
            probed = [None] * len(mine)
        full = [k for k, call in enumerate(mine)
                if batch_index * len(calls) + call in self.full
                or not probes_agree(probed[k], expected[k], self.tolerances[calls[call][0]])]
        if not full:
            return True
        name = f"timed_{batch_index}.pt"
        _expect(self.cand.request({"cmd": "outputs", "calls": [mine[k] for k in full], "file": name}), "status")
        try:
            import torch

            got = torch.load(self.scratch / name, weights_only=True)
            assert isinstance(got, list) and len(got) == len(full)
        except Exception:
            self.run.failures.append("[timed-check] the outputs of timed calls could not be read back")
            return False
        finally:
            (self.scratch / name).unlink(missing_ok=True)
        self.run.full_checks += len(full)
        for k, output in zip(full, got):
            label = f"timed call {batch_index * len(calls) + mine[k]}"
            failure = full_check_failure(self.reference, self.pools, self.policy, self.device, calls[mine[k]],
                                         output, positions[k], probed[k], label)
            if failure:
                self.run.failures.append(failure)
                return False
        return True
