"""A shrunk copy of the problem, for the checks that run the reference's forward many times (the ablation and the
term canaries): where one forward at the problem's own sizes is too slow for their budget, the problem's size
constants are rescaled (kernelbench/shrink.py, as `eval --shrink` does for the CPU) until its bytes and FLOPs are
`ratio` of the original's, and the reference is computed again under the same trial seeds and the same input
distributions. A part that does not matter on the copy is a part a kernel could skip there; the copy's sizes are
said wherever it decides something."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from harness.policy import EvalPolicy
from harness.verification.reference import ReferenceRun, reference_threads, run_reference
from kernelbench.problem import ProblemError
from kernelbench.shrink import Budget, describe_changes, measure, shrink_problem

_BACK_OFF = 8  # where the sizes cannot reach `ratio`, try this many times larger, up to the original


@dataclass
class ShrunkCopy:
    reference: ReferenceRun  # the copy's reference: its model, trials and outputs
    changes: str  # the size changes, `dim 65536->4096`
    ratio: float  # the share of the original's bytes and FLOPs it was shrunk to


def shrunk_copy(reference: ReferenceRun, policy: EvalPolicy, device: str, ratio: float) -> ShrunkCopy | str:
    """The problem shrunk to about `ratio` of its bytes and FLOPs, its reference computed on `device` under the
    same trial seeds and distributions; else why not (a sentence for a note)."""
    problem = reference.problem
    if problem is None:
        return "the problem's source is not known here"
    try:
        with reference_threads(policy.cpu_threads):
            before = measure(problem.source)
    except ProblemError as exc:
        return f"its sizes cannot be measured ({exc})"
    while ratio < 1:
        budget = Budget(max_bytes=max(1, int(before.bytes * ratio)), max_flops=before.flops * ratio)
        try:
            with reference_threads(policy.cpu_threads):  # it runs the problem's code (on `meta`): one at a time
                result = shrink_problem(problem, budget)
        except ProblemError:  # some sizes cannot go that low: a smaller shrink still helps
            ratio *= _BACK_OFF
            continue
        if not result.changes:
            break
        # the same seeds through the same distribution schedule: varied wherever the original's trials were
        varied = any(name != "default" for name in reference.distributions)
        try:
            copy = run_reference(result.problem, device, secrets.randbits(31), reference.trial_seeds,
                                 policy.cpu_threads, vary_distributions=varied)
        except ProblemError as exc:
            return f"the reference fails at the shrunk sizes ({describe_changes(result.changes)}: {exc})"
        return ShrunkCopy(copy, describe_changes(result.changes), ratio)
    return "it has no size constant that can be reduced"
