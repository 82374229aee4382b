"""A pass/fail comparison for the canaries, which compare many wrong outputs and need no message: an output whose
norm-wise relative error is far above the tolerance fails at once (compare_trial would fail it too, after its
careful float64 pass that finds and describes the first wrong element, seconds on a 64 MB output); anything
closer, or not finite, goes to compare_trial itself."""

from __future__ import annotations

from typing import Any

from harness.policy import EvalPolicy
from harness.verification.compare import _flatten, compare_trial, tolerance_for

_MARGIN = 2.0  # a norm computed in float32 differences is off by far less than 2x: past it, compare_trial fails


def passes(seed: int, expected: Any, got: Any, policy: EvalPolicy) -> bool:
    """What compare_trial(...).passed says, in one pass where the output is clearly wrong."""
    if _clearly_wrong(expected, got, policy):
        return False
    return compare_trial(seed, expected, got, policy).passed


def _clearly_wrong(expected: Any, got: Any, policy: EvalPolicy) -> bool:
    import torch

    refs, gots = _flatten(expected), _flatten(got)
    if len(refs) != len(gots):
        return True
    for ref, out in zip(refs, gots):
        if type(ref) is not torch.Tensor or type(out) is not torch.Tensor or out.shape != ref.shape \
                or out.dtype != ref.dtype or not ref.is_floating_point() or not ref.numel():
            continue  # compare_trial says
        exact = torch.float64 if ref.dtype == torch.float64 else torch.float32
        ref_norm = float(torch.linalg.vector_norm(ref.to(exact), dtype=torch.float64))
        diff_norm = float(torch.linalg.vector_norm(out.to(exact) - ref.to(exact), dtype=torch.float64))
        if not (ref_norm > 0 and ref_norm < float("inf") and diff_norm < float("inf")):
            continue  # zeros, infinities, NaN: compare_trial's careful rules
        if diff_norm / ref_norm > _MARGIN * tolerance_for(ref.dtype, policy):
            return True
    return False
