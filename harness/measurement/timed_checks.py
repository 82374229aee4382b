"""Checks on timed calls (run in the parent, between batches, never inside a timed window).

Every timed call is probed right after its batch's `done`: values at secret positions of its outputs, read from
the candidate's child and from the reference's child, which ran the reference on bit-identical fresh inputs (it
never loads candidate code); on the CPU the parent reads them from the frozen children's memory itself. Values within tolerance pass; a random few calls, and every call whose probe differs,
are then fetched in full and compared with references the parent computes itself: a changed value shows work still
running after `done`, a wrong one a wrong result. Probing both children costs two small requests per batch where a
full check costs a file round trip, a reference forward and a comparison (about 4 ms per call on 1 MB of output).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from harness.defences import is_off
from harness.policy import EvalPolicy
from harness.records import Check, Finding
from harness.values.fresh_inputs import fresh_inputs
from harness.values.integrity import flatten
from harness.values.tensors import portable, values_at
from harness.verification.compare import compare_trial, element_atol, tolerance_for
from harness.verification.reference import ReferenceRun

PROBE_POSITIONS = 16


@dataclass(frozen=True)
class Tolerance:
    exact: bool  # integer and bool outputs: equal values only
    rtol: float
    atol: float


def trial_tolerances(reference: ReferenceRun, policy: EvalPolicy) -> list[list[Tolerance]]:
    """Per trial, per output tensor: the element-wise bar of `compare_tensor` (atol in units of the output's rms)."""
    import torch

    tolerances = []
    for output in reference.outputs:
        per_tensor = []
        for tensor in (t for t in flatten(output) if t is not None):
            if not isinstance(tensor, torch.Tensor) or not (tensor.is_floating_point() or tensor.is_complex()):
                per_tensor.append(Tolerance(True, 0.0, 0.0))
                continue
            tol = tolerance_for(tensor.dtype, policy)
            per_tensor.append(Tolerance(False, tol, element_atol(tensor, tol)))
        tolerances.append(per_tensor)
    return tolerances


def probes_agree(got: Any, want: Any, tolerances: list[Tolerance]) -> bool:
    """The candidate's probed values (untrusted: any shape) against the reference child's at the same positions."""
    if is_off("probes"):
        return True
    if not isinstance(got, list) or not isinstance(want, list) or len(got) != len(want) or len(want) != len(tolerances):
        return False
    for got_values, want_values, tolerance in zip(got, want, tolerances):
        if not isinstance(got_values, list) or len(got_values) != len(want_values):
            return False
        if not all(_value_agrees(g, w, tolerance) for g, w in zip(got_values, want_values)):
            return False
    return True


def _value_agrees(got: Any, want: float, tolerance: Tolerance) -> bool:
    if type(got) not in (float, int) or type(want) not in (float, int):
        return False
    if got == want or (math.isnan(got) and math.isnan(want)):
        return True
    if tolerance.exact or not (math.isfinite(got) and math.isfinite(want)):
        return False
    return abs(got - want) <= tolerance.atol + tolerance.rtol * abs(want)


def probe_positions(rng: random.Random, count: int) -> list[list[int]]:
    return [[rng.randrange(1 << 30) for _ in range(PROBE_POSITIONS)] for _ in range(count)]


def changed_since_probe(output: Any, positions: list[int], values: Any) -> bool:
    """True when the fetched output no longer holds the values probed right after `done`."""
    import torch

    tensors = [t for t in flatten(output) if isinstance(t, torch.Tensor)]
    if not isinstance(values, list) or len(values) != len(tensors):
        return True
    return any(not probes_agree([values_at(tensor, positions)], [seen], [Tolerance(True, 0.0, 0.0)])
               for tensor, seen in zip(tensors, values))


def expected_output(reference: ReferenceRun, pools: list[Any], trial: int, recipe: Any, device: str) -> Any:
    """The parent's own reference output for one timed call's fresh inputs."""
    import torch

    inputs = fresh_inputs(reference.trial_inputs[trial], pools, recipe, device)
    with torch.no_grad():
        return portable(reference.model(*inputs))


def full_check_failure(reference: ReferenceRun, pools: list[Any], policy: EvalPolicy, device: str, call: Any,
                       output: Any, positions: list[int], probed: Any, label: str) -> Finding | None:
    """Why a fetched timed output fails (work after `done`, or a wrong result), or None."""
    if changed_since_probe(output, positions, probed):
        return Finding(
            Check.WORK_AFTER_RETURN, f"{label}: its output changed after the timer stopped (work still running "
            "after `done`)")
    trial, recipe = call
    expected = expected_output(reference, pools, trial, recipe, device)
    result = compare_trial(reference.trial_seeds[trial], expected, output, policy)
    if not result.passed:
        return Finding(Check.TIMED_CHECK, f"{label} (fresh inputs) returned a wrong result: {result.message}")
    return None
