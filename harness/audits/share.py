"""The kernels' share: an audit batch whose time inside the candidate's kernel functions the child sums (CPU: a
CPU kernel's calls finish before they return), set against the parent's own clock over the same batch. Under 5%
of forward's time, no speedup is credited to the kernels (`[runtime-compute]`, harness/decision/gates.py
runtime_compute): the time went to PyTorch, or to spinning."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from harness.audits.audit import Audit, Audited
from harness.checks import Row, row
from harness.isolation import protocol as P
from harness.policy import EvalPolicy
from harness.records import Check


class Share(Audit):
    kind: ClassVar[str] = P.SHARE
    row: ClassVar[Row] = row(Check.RUNTIME_COMPUTE)

    def runs(self, policy: EvalPolicy, device: str) -> bool:
        return policy.hardening and device == "cpu"

    def read(self, found: Audited, done: P.Done | None, batch_ns: int, calls: int) -> Audited:
        """`own_ns` (untrusted: a kernel that hides its time only loses credit) against the batch's `batch_ns`."""
        own = done.own_ns if done is not None else None
        if own is None:
            return found
        return replace(found, own_ns=found.own_ns + own, clocked_ns=found.clocked_ns + batch_ns)
