"""Outputs the caller holds never change (runs in the parent, CPU protocol).

A program that keeps a result keeps its memory: a kernel may reuse memory only after the caller released it. The
in-batch aliasing check sees a buffer reused within one batch; a 64 MB problem runs one call per batch, so a ring of
buffers, or one buffer reused from the first call on, was accepted at 2.2-2.7x (it skips the page faults of fresh
memory). Here the parent keeps, at random, some timed calls' outputs alive in the candidate's process (the child's
`run` takes a `hold` list), a couple of them from early calls until timing ends and others for a random number of
batches, and after every batch re-reads the values it probed in them: a held output that changed was overwritten by
a later call. Released outputs may be reused, as torch's own caching allocator does.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from harness.measurement.frozen_calls import FrozenSide, TensorAt
from harness.records import Check, Finding

LONG_HOLDS = 2  # outputs of early calls held until timing ends: a ring must be longer than every timed call
SHORT_HOLD_BATCHES = 8  # the most batches a short hold lasts


@dataclass
class Held:
    handle: int
    label: str  # which timed call made it
    tensors: list[TensorAt | str]
    positions: list[int]
    values: list[Any]  # probed right after its batch
    until: int  # the batch after which it is released (math.inf: when timing ends)


class HeldOutputs:
    def __init__(self, side: FrozenSide, rng: random.Random, batches: int) -> None:
        self.side, self.rng, self.batches = side, rng, batches
        self.held: list[Held] = []
        self.long = 0
        self.handles = 0
        self.checked = 0  # verifications made (a held output re-read after a later batch)

    def after_batch(self, index: int, first_call: int, mine: list[int], positions: list[list[int]],
                    probed: list[Any]) -> Finding | None:
        """Verify every held output, release the expired ones, maybe hold one of this batch's; the failure if a
        held output changed."""
        for held in self.held:
            now = self.side.values_at(held.tensors, held.positions)
            self.checked += 1
            if not _same(now, held.values):
                return Finding(
                    Check.HELD_OUTPUT, f"the output of {held.label}, still held by the caller, was overwritten by a "
                    f"later call (its memory was reused before it was released): a kernel may reuse memory only "
                    "after the caller lets go of it")
        for held in [h for h in self.held if h.until <= index]:
            self.held.remove(held)
            self.side.to_release.append(held.handle)
        if mine:
            self._maybe_hold(index, first_call, mine, positions, probed)
        return None

    def _maybe_hold(self, index: int, first_call: int, mine: list[int], positions: list[list[int]],
                    probed: list[Any]) -> None:
        early = index < max(1, self.batches // 4)
        if early and self.long < LONG_HOLDS and self.rng.random() < 0.5:
            until: float = math.inf
            self.long += 1
        elif self.rng.random() < 0.5 and len(self.held) < LONG_HOLDS + 2:
            until = index + self.rng.randint(1, SHORT_HOLD_BATCHES)
        else:
            return
        k = self.rng.randrange(len(mine))
        self.handles += 1
        self.held.append(Held(self.handles, f"timed call {first_call + mine[k]}", self.side.tensors(mine[k]),
                              positions[k], probed[k], until))
        self.side.to_hold.append([self.handles, mine[k]])


def _same(now: Any, then: Any) -> bool:
    """Equal as read, NaN equal to NaN (the same memory read twice holds the same bits)."""
    if isinstance(now, list) and isinstance(then, list):
        return len(now) == len(then) and all(_same(a, b) for a, b in zip(now, then))
    if isinstance(now, float) and isinstance(then, float) and math.isnan(now) and math.isnan(then):
        return True
    return type(now) is type(then) and now == then
