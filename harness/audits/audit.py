"""What every audit among the timed calls declares, and the facts they yield together (runs in the parent)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, ClassVar

from harness.checks import Row
from harness.isolation import protocol as P
from harness.policy import EvalPolicy


@dataclass(frozen=True)
class Audited:
    """What the audit batches found over a timed run (harness/decision/gates.py reads it through `TimedRun`)."""

    knockouts: int = 0  # knock-out: timed calls made with the candidate's kernel functions poisoned
    knocked_out_right: bool | None = None  # one of them still returned the right answer (None: none was made)
    own_ns: int = 0  # share: inside the candidate's kernel functions, over the clocked batches (CPU)
    clocked_ns: int = 0  # those batches' own time on the parent's clock, less the pipe
    census_ops: dict[str, int] | None = None  # census: PyTorch operators run outside the kernels
    census_calls: int = 0  # the calls the census batches made
    census_flops: float = 0.0  # the work those operators did, inside the kernels too (harness/child/census.py)

    @property
    def own_share(self) -> float | None:
        """The candidate's kernels' share of forward's time on timed calls (CPU), or None where none was clocked."""
        return min(1.0, self.own_ns / self.clocked_ns) if self.clocked_ns > 0 else None


def added(found: list[Audited]) -> Audited:
    """Several process sets' audits as one: counts added up, a knock-out right anywhere right."""
    return Audited(
        knockouts=sum(a.knockouts for a in found),
        knocked_out_right=None if all(a.knocked_out_right is None for a in found) else any(
            a.knocked_out_right for a in found),
        own_ns=sum(a.own_ns for a in found), clocked_ns=sum(a.clocked_ns for a in found),
        census_ops=merged_ops([a.census_ops for a in found]), census_calls=sum(a.census_calls for a in found),
        census_flops=sum(a.census_flops for a in found))


def merged_ops(found: list[dict[str, int] | None]) -> dict[str, int] | None:
    """The operators counted by several census batches, added up (None where no batch ran under the census)."""
    if all(ops is None for ops in found):
        return None
    merged: dict[str, int] = {}
    for ops in found:
        for name, count in (ops or {}).items():
            merged[name] = merged.get(name, 0) + count
    return merged


Judge = Callable[[int], bool]  # whether call `i` of the audit batch still returned the right answer


class Audit:
    """One audit among the timed calls: its registry row, when it runs, what it asks of the candidate's batch,
    how the child's `done` is read (`read`, right after the batch) and, where an output must be judged, how
    (`judged`, once the batch's probes have passed)."""

    kind: ClassVar[str]  # its name on the wire (`P.Audit.kind`)
    row: ClassVar[Row]  # the check it gathers for (harness/checks.py)

    def runs(self, policy: EvalPolicy, device: str) -> bool:
        raise NotImplementedError

    def ask(self, draw: Callable[[int], int], batch: int) -> P.Audit:
        """What the candidate's batch of `batch` calls is asked (`draw(n)`: a secret index below n)."""
        return P.Audit(self.kind)

    def read(self, found: Audited, done: P.Done | None, batch_ns: int, calls: int) -> Audited:
        return found

    def judged(self, found: Audited, done: P.Done | None, asked: P.Audit, judge: Judge) -> Audited:
        return found
