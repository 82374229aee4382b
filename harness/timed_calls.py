"""Timing driven and clocked by the parent (runs in the parent).

The reference is timed in its own child that never loads candidate code, the candidate in its child, in
alternating batches. For each batch the parent has the child stage fresh inputs (untimed), then sends `go` and
reads `done` on its own `perf_counter_ns`: nothing in either child can touch that clock, and a batch only ends
when the child has synchronized the device. Right after a checked batch the parent reads values at secret
positions of its outputs (work still running after `done` shows as a mismatch), then fetches those outputs and
compares them with references it computes itself for the same fresh inputs.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compare import compare_trial
from harness.fresh_inputs import draw_recipe, fresh_inputs, make_pools
from harness.integrity import flatten
from harness.policy import EvalPolicy
from harness.reference import ReferenceRun
from harness.session import ChildSession
from harness.tensors import portable

_PROBE_POSITIONS = 8


@dataclass
class TimedRun:
    ref_ms: list[float] = field(default_factory=list)
    candidate_ms: list[float] = field(default_factory=list)
    batch_size: int = 1
    overhead_ms: float = 0.0
    checked_calls: int = 0
    total_calls: int = 0
    failures: list[str] = field(default_factory=list)  # `[check] reason`, decisive
    slot_wait_s: float = 0.0  # waiting for the device's timing slot (another evaluation was being timed)


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
        total = batch * batches
        checked = set(self.rng.sample(range(total), min(total, self.policy.timed_checks))) \
            if self.policy.hardening else set()
        self.run.batch_size, self.run.total_calls, self.run.checked_calls = batch, total, len(checked)
        for index in range(batches):
            calls = self.recipes(batch)
            order = (self.ref, self.cand) if index % 2 == 0 else (self.cand, self.ref)
            for session in order:
                sample = _batch_ms(session, calls, overhead, session is self.ref)
                (self.run.ref_ms if session is self.ref else self.run.candidate_ms).append(sample)
                mine = [i for i in range(batch) if index * batch + i in checked]
                if session is self.cand and mine and not self._check(index, calls, mine):
                    return self.run
        return self.run

    def _check(self, batch_index: int, calls: list[Any], mine: list[int]) -> bool:
        """Probe right after `done`, then compare the full outputs with the parent's own references."""
        import torch

        positions = [[self.rng.randrange(1 << 30) for _ in range(_PROBE_POSITIONS)] for _ in mine]
        probed = _expect(self.cand.request({"cmd": "probe", "calls": mine, "positions": positions}), "values")
        name = f"timed_{batch_index}.pt"
        _expect(self.cand.request({"cmd": "outputs", "calls": mine, "file": name}), "status")
        try:
            got = torch.load(self.scratch / name, weights_only=True)
            assert isinstance(got, list) and len(got) == len(mine)
        except Exception:
            self.run.failures.append("[timed-check] the outputs of timed calls could not be read back")
            return False
        finally:
            (self.scratch / name).unlink(missing_ok=True)
        for call, output, where, values in zip(mine, got, positions, probed):
            if _probe_differs(output, where, values):
                self.run.failures.append(f"[work-after-return] timed call {batch_index * len(calls) + call}: its "
                                         "output changed after the timer stopped (work still running after `done`)")
                return False
            trial, recipe = calls[call]
            expected = self._expected(trial, recipe)
            result = compare_trial(self.reference.trial_seeds[trial], expected, output, self.policy)
            if not result.passed:
                self.run.failures.append(f"[timed-check] timed call {batch_index * len(calls) + call} (fresh "
                                         f"inputs) returned a wrong result: {result.message}")
                return False
        return True

    def _expected(self, trial: int, recipe: Any) -> Any:
        import torch

        inputs = fresh_inputs(self.reference.trial_inputs[trial], self.pools, recipe, self.device)
        with torch.no_grad():
            return portable(self.reference.model(*inputs))


def _probe_differs(output: Any, positions: list[int], values: Any) -> bool:
    import torch

    tensors = [t for t in flatten(output) if isinstance(t, torch.Tensor)]
    if not isinstance(values, list) or len(values) != len(tensors):
        return True
    for tensor, seen in zip(tensors, values):
        flat = tensor.reshape(-1)
        if not flat.numel():
            continue
        now = [float(flat[p % flat.numel()].item()) for p in positions]
        if len(now) != len(seen) or any(not (a == b or (math.isnan(a) and isinstance(b, float) and math.isnan(b)))
                                         for a, b in zip(now, seen)):
            return True
    return False
