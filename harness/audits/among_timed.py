"""The audits among the timed calls, in the order their positions are drawn."""

from __future__ import annotations

from harness.audits.audit import Audit
from harness.audits.census import Census
from harness.audits.knockout import Knockout
from harness.audits.share import Share
from harness.policy import EvalPolicy

AUDITS: tuple[Audit, ...] = (Knockout(), Share(), Census())


def audits_for(policy: EvalPolicy, device: str) -> list[Audit]:
    """The audits a timed run on `device` makes under `policy`, one batch each."""
    return [audit for audit in AUDITS if audit.runs(policy, device)]
