"""The correctness trials on the CPU, made exactly as every timed call is made (runs in the parent).

The candidate's process gets the trials' inputs the way it gets every timed call's: written by the parent into its
input slots while its process tree is frozen, then thawed, `run` on slot numbers, `done`, frozen again. The
parent then reads each whole output from the frozen child's memory itself, looks at where the outputs lie
(aliasing), whether the inputs still hold what was written (mutation), and, after letting the child run idle for
a moment, whether the outputs moved (work that finished after `done`). No command, switch or flag tells these
calls from the timed ones, and no harness code in the candidate's process packs or saves what is compared.

While the trials run, this evaluation holds the machine's checking lock (harness/isolation/timing_slot.py): no CPU
timing of another evaluation runs meanwhile, so thawing this child never contends with a measurement, and no timing's
end thaws it behind this protocol's back.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from harness.isolation import protocol as P
from harness.measurement.frozen_calls import FrozenSide, SideFailure
from harness.records import Check, Finding
from harness.values.tensors import NOT_PLAIN

_IDLE_S = 0.005  # how long the child runs idle before its outputs are read again (work after `done`)


@dataclass
class CheckedTrials:
    outputs: list[Any] = field(default_factory=list)  # per trial, the whole output of each of its calls
    findings: list[Finding] = field(default_factory=list)  # each rejects (harness/decision/gates.py)
    kernel_calls: int = 0  # the candidate's kernel calls during the trials, as its process reported them
    calls: int = 0  # forward calls made (every trial once, one of them twice)


def run_trials(side: FrozenSide, trial_inputs: list[list[Any]], rng: random.Random,
               mutating_reference: bool) -> CheckedTrials:
    """Every trial once, in a secret order, in batches no larger than the slots, and the first of them again at
    the end in another slot: a cache keyed on input values hits there (its kernel calls show it, see
    `cache_finding`), and both calls' outputs are judged. Raises SideFailure where the candidate's process broke
    the protocol, ChildFailed (harness/isolation/protocol.py) where it reported its own failure."""
    order = list(range(len(trial_inputs)))
    rng.shuffle(order)
    order.append(order[0])
    checked = CheckedTrials(outputs=[[] for _ in trial_inputs])
    width = max(1, len(side.slots))
    for start in range(0, len(order), width):
        chunk = order[start:start + width]
        values = [trial_inputs[t] for t in chunk]
        _, reply = side.batch(values)
        try:
            done = P.read_reply(P.Run, reply)
        except P.MalformedReply:
            done = None
        if done is None or done.done != len(chunk):
            raise SideFailure(f"unexpected reply to `run`: {str(reply)[:200]}")
        checked.kernel_calls += done.kernel_calls or 0
        outputs = [side.fetch(call) for call in range(len(chunk))]
        checked.findings += _output_types(side, len(chunk)) + side.aliasing(len(chunk))
        if not mutating_reference:
            checked.findings += _mutations(side, values)
        if _moved_after_done(side, outputs):
            checked.findings.append(Finding(Check.WORK_AFTER_RETURN, "an output kept changing after forward() returned "
                                            "(work on another thread finished later)"))
        for trial, output in zip(chunk, outputs):
            checked.outputs[trial].append(output)
        checked.calls += len(chunk)
    checked.findings = list(dict.fromkeys(checked.findings))
    return checked


def cache_finding(checked: CheckedTrials, timed_kernel_calls: int, timed_calls: int) -> Finding | None:
    """`[cache]` when the trials made fewer kernel calls than every timed call makes (the same number each, so
    a steady count per call): a call among them, likely the repeated input set, was answered from an earlier
    call's output instead of the kernel."""
    if not timed_calls or not timed_kernel_calls or timed_kernel_calls % timed_calls:
        return None
    per_call = timed_kernel_calls // timed_calls
    if checked.kernel_calls >= per_call * checked.calls:
        return None
    return Finding(
        Check.CACHE, f"forward() made {checked.kernel_calls} kernel calls on {checked.calls} checked calls (one a "
        f"repeat of an earlier input set) where every timed call makes {per_call}: an output came from an earlier "
        "call, not from the kernel")


def _output_types(side: FrozenSide, calls: int) -> list[Finding]:
    found = []
    for call in range(calls):
        for index, tensor in enumerate(side.tensors(call)):
            if isinstance(tensor, str) and tensor.startswith(NOT_PLAIN):
                found.append(Finding(Check.OUTPUT_TYPE, f"output {index} is not a plain dense CPU torch.Tensor (a "
                                     "tensor subclass can compute lazily or lie about its values): return a plain "
                                     "torch.Tensor"))
    return found


def _mutations(side: FrozenSide, values: list[list[Any]]) -> list[Finding]:
    found = []
    for slot, inputs in enumerate(values):
        changed = side.inputs_changed(slot, inputs)
        if changed:
            found.append(Finding(Check.MUTATION, f"forward() modified input(s) {changed} in place"))
    return found


def _moved_after_done(side: FrozenSide, outputs: list[Any]) -> bool:
    """Thaw the idle child for a moment, freeze it, read the outputs again: an honest child has nothing running."""
    side.session.thaw()
    time.sleep(_IDLE_S)
    side.session.freeze()
    return any(not _same(first, side.fetch(call)) for call, first in enumerate(outputs))


def _same(first: Any, again: Any) -> bool:
    import torch

    if isinstance(first, torch.Tensor) and isinstance(again, torch.Tensor):
        return first.shape == again.shape and torch.equal(_bytes(first), _bytes(again))
    if isinstance(first, list) and isinstance(again, list) and len(first) == len(again):
        return all(_same(a, b) for a, b in zip(first, again))
    return True  # unreadable either time: the comparison reports it


def _bytes(tensor: Any) -> Any:
    import torch

    return tensor.contiguous().reshape(-1).view(torch.uint8)
