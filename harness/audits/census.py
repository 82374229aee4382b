"""The compute census: an audit batch run under a count of the PyTorch operators forward runs outside the
candidate's kernels, and of the work they do inside them (harness/child/census.py). Strict refuses any; default
says it, and credits no speedup to kernels that do a negligible share of the work (`[runtime-compute]`,
harness/decision/gates.py runtime_compute). Where nothing is timed, it is a call of its own after the trials.

What the child reports is untrusted: it can only accuse itself, or hide."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from harness.audits.audit import Audit, Audited, merged_ops
from harness.checks import Row, row
from harness.isolation import protocol as P
from harness.policy import EvalPolicy
from harness.records import Check


class Census(Audit):
    kind: ClassVar[str] = P.CENSUS
    row: ClassVar[Row] = row(Check.RUNTIME_COMPUTE)

    def runs(self, policy: EvalPolicy, device: str) -> bool:
        return policy.hardening  # (static_policy "off" stands for a static policy evaded: the census still runs)

    def read(self, found: Audited, done: P.Done | None, batch_ns: int, calls: int) -> Audited:
        counted = done.census if done is not None else None
        return replace(found, census_calls=found.census_calls + calls,
                       census_ops=merged_ops([found.census_ops, census_ops(counted)]),
                       census_flops=found.census_flops + census_flops(counted))


def census_ops(found: Any) -> dict[str, int]:
    """A child's census of one batch: operator names and counts."""
    ops = found.get("ops") if isinstance(found, dict) else None
    if not isinstance(ops, dict):
        return {}
    return {str(name)[:60]: count for name, count in list(ops.items())[:50] if type(count) is int and count > 0}


def census_flops(found: Any) -> float:
    """The library's work in a child's census of one batch."""
    flops = found.get("library_flops") if isinstance(found, dict) else None
    return float(flops) if type(flops) in (int, float) and flops > 0 and flops == flops else 0.0


def of_its_own(found: Any) -> dict[str, Any] | None:
    """The census of the call of its own (`census`'s reply), with the kernels' share of its time where the child
    clocked both."""
    if not isinstance(found, dict) or not isinstance(found.get("ops"), dict):
        return None
    ops = {str(k)[:60]: v for k, v in list(found["ops"].items())[:50] if type(v) is int and v > 0}
    library, own = found.get("library_s"), found.get("own_s")
    timed = type(library) is float and type(own) is float and library + own > 0
    return {"ops": ops, "share": own / (own + library) if timed else None, "flops": census_flops(found)}


def among_timed(audited: Audited) -> dict[str, Any] | None:
    """The census the audit batches gathered, as the facts hold it (None where none ran)."""
    if audited.census_ops is None:
        return None
    return {"ops": audited.census_ops, "share": None, "calls": audited.census_calls, "flops": audited.census_flops}
