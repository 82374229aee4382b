"""A population instead of one best: an archive of accepted kernels kept diverse by approach (a structural
signature of the source), parents chosen among the best and the different, and a combine move that gives the
coder two kernels of different approaches and what each does well. Pure bookkeeping: the loop asks it for a
round's plan (agent/loop.py) and the benchmark drives it with a simulated coder (benchmarks/bench_search.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# what a kernel's source says about its approach: one word per feature found (C++ and CUDA alike)
_FEATURES = [("openmp", r"#\s*pragma\s+omp\s+parallel"), ("simd", r"#\s*pragma\s+omp\s+(?:parallel\s+for\s+)?simd|__m256|__m512|_mm\d*_"),
             ("blocked", r"BLOCK|TILE|\w+0\s*\+=\s*\w*(?:BLOCK|TILE|tile|block)"), ("unrolled", r"#\s*pragma\s+unroll|"
             r"UNROLL"), ("register_block", r"template\s*<\s*int\s+\w+\s*>|float\s+acc\[\s*\w+\s*\]|float\s+a\[\s*R"),
             ("shared_memory", r"__shared__"), ("warp_shuffle", r"__shfl"), ("tensor_cores", r"wmma|mma\.sync|"
             r"__nv_bfloat162|cute::"), ("vector_loads", r"float4|float2|__ldg"), ("tuned", r"^TUNE\s*=")]


def signature(source: str) -> str:
    """The approach a kernel takes, as a sorted set of structural features ("plain" when none is found)."""
    found = [name for name, pattern in _FEATURES if re.search(pattern, source, re.MULTILINE)]
    return "+".join(found) if found else "plain"


@dataclass
class Member:
    """An accepted kernel in the archive: its full-protocol speedup, approach, and what the judge said of it."""

    key: str
    source: str
    speedup: float
    approach: str
    diagnosis: str = ""
    payload: Any = None  # what the loop keeps with it (its Attempt)


@dataclass
class SlotPlan:
    """What one coder slot of a round starts from: `best` (the judged best kernel, with the judge's advice), `parent`
    (another approach's best, with what was said of it), `combine` (two kernels of different approaches) or
    `explore` (the best kernel, to be rewritten with an approach the archive does not hold yet)."""

    kind: str
    parents: list[Member] = field(default_factory=list)


class Archive:
    """At most `per_approach` kernels per approach (the fastest), at most `size` in all (the slowest approaches'
    go first)."""

    def __init__(self, size: int = 12, per_approach: int = 2, combine_every: int = 2, combine_tries: int = 2) -> None:
        self.size, self.per_approach, self.combine_every = size, per_approach, combine_every
        self.combine_tries = combine_tries  # combine moves per pair (a reply can fail for reasons of its own)
        self.members: list[Member] = []
        self.combined: dict[frozenset[str], int] = {}  # combine moves given to each pair so far

    def add(self, member: Member) -> bool:
        """Keep `member` if it is new and among the best of its approach; whether it was kept."""
        if any(m.key == member.key for m in self.members):
            return False
        same = sorted([m for m in self.members if m.approach == member.approach] + [member], key=lambda m: -m.speedup)
        kept = same[:self.per_approach]
        self.members = [m for m in self.members if m.approach != member.approach] + kept
        self.members.sort(key=lambda m: -m.speedup)
        del self.members[self.size:]
        return member in self.members

    def note(self, key: str, diagnosis: str) -> None:
        for member in self.members:
            if member.key == key:
                member.diagnosis = diagnosis

    def leaders(self) -> list[Member]:
        """The fastest kernel of each approach, fastest first: the best, then the different."""
        seen, leaders = set(), []
        for member in self.members:
            if member.approach not in seen:
                seen.add(member.approach)
                leaders.append(member)
        return leaders

    def plan(self, candidates: int, round_: int) -> list[SlotPlan]:
        """A round's slots spread over parents: slot 1 the best kernel (the one the judge advised on); a second move
        (every `combine_every` rounds when there is one slot, then in its place) combines the fastest two approaches
        not combined before, or, with none left, explores a new approach; the other slots go to the next
        approaches' leaders, then back to the best."""
        leaders = self.leaders()
        if not leaders:
            return [SlotPlan("best") for _ in range(candidates)]
        plans = [SlotPlan("best", [leaders[0]])]
        second_move = candidates >= 2 or round_ % self.combine_every == 0
        pair = self._pair(leaders) if second_move else None
        if pair is not None:
            key = frozenset(m.key for m in pair)
            self.combined[key] = self.combined.get(key, 0) + 1
            move = SlotPlan("combine", pair)
        else:  # nothing left to combine: look for another approach, from the best kernel
            move = SlotPlan("explore", [leaders[0]])
        if second_move and candidates == 1:
            return [move]
        if second_move:
            plans.append(move)
        others = leaders[1:]
        while len(plans) < candidates:
            plans.append(SlotPlan("parent", [others[(len(plans) - 2) % len(others)]]) if others else
                         SlotPlan("best", [leaders[0]]))
        return plans[:candidates]

    def _pair(self, leaders: list[Member]) -> list[Member] | None:
        """The fastest two leaders, combined fewer than `combine_tries` times, whose approaches each bring something
        the other lacks."""
        for i, first in enumerate(leaders):
            for second in leaders[i + 1:]:
                one, other = set(first.approach.split("+")), set(second.approach.split("+"))
                tries = self.combined.get(frozenset({first.key, second.key}), 0)
                if one <= other or other <= one or tries >= self.combine_tries:
                    continue
                return [first, second]
        return None
