"""The knock-out: one call of an audit batch made with every one of the candidate's kernel functions poisoned
(harness/compilation/build_cache.py KernelSwitch), at an index only the parent draws. Its output must then be
wrong: a right answer means the kernel does not compute what was timed (`[ghost-kernel]`, harness/decision/gates.py
ghost_kernel). Where nothing is timed, it is a call of its own after the trials, its output left in a file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, ClassVar

from harness.audits.audit import Audit, Audited, Judge
from harness.checks import Row, row
from harness.defences import is_off
from harness.isolation import protocol as P
from harness.policy import EvalPolicy
from harness.records import Check
from harness.verification.compare import compare_trial
from harness.verification.reference import ReferenceRun


class Knockout(Audit):
    kind: ClassVar[str] = P.KNOCKOUT
    row: ClassVar[Row] = row(Check.GHOST_KERNEL)

    def runs(self, policy: EvalPolicy, device: str) -> bool:
        return policy.hardening and policy.knockout and not is_off(str(self.row.switch))

    def ask(self, draw: Callable[[int], int], batch: int) -> P.Audit:
        """One call of the batch, at an index drawn in the parent, poisoned."""
        return P.Audit(self.kind, draw(batch))

    def judged(self, found: Audited, done: P.Done | None, asked: P.Audit, judge: Judge) -> Audited:
        """Where the child says the call ran poisoned (False: it has no kernel function to poison), whether its
        output still came out right."""
        if asked.call is None or done is None or not done.poisoned:
            return found
        right = judge(asked.call)
        return replace(found, knockouts=found.knockouts + 1, knocked_out_right=bool(found.knocked_out_right) or right)


def still_right(path: Path, reference: ReferenceRun, policy: EvalPolicy) -> bool:
    """The call of its own: whether forward, with every function of the extension poisoned, still returned the
    right answer (its output, in the file the child left)."""
    try:
        import torch

        knocked = torch.load(path, weights_only=True)
    except Exception:  # a tampered file proves nothing either way; the other checks still run
        return False
    expected = reference.outputs[0] if reference.knockout_output is None else reference.knockout_output
    return knocked is not None and compare_trial(reference.trial_seeds[0], expected, knocked, policy).passed
