"""Compare candidate outputs with reference outputs: structure, shape, dtype, NaN, tolerance, relative error."""

from __future__ import annotations

from typing import Any

from harness.policy import EvalPolicy
from harness.records import TrialResult
from harness.values.tensors import UNSUPPORTED


def _flatten(output: Any) -> list[Any]:
    if isinstance(output, (tuple, list)):
        return [item for part in output for item in _flatten(part)]
    return [output]


def tolerance_for(dtype: Any, policy: EvalPolicy) -> float:
    import torch

    return policy.atol_half if dtype in (torch.float16, torch.bfloat16) else policy.atol_fp32


def output_rms(ref: Any) -> float:
    """Root mean square of the reference's finite elements (complex: of its real and imaginary parts)."""
    import torch

    values = (torch.view_as_real(ref) if ref.is_complex() else ref).double()
    finite = values[torch.isfinite(values)]
    return float(finite.pow(2).mean().sqrt()) if finite.numel() else 0.0


def element_atol(ref: Any, tol: float) -> float:
    """Absolute tolerance in units of the output's own size (rms of its finite elements, at least 1): a sum of
    large terms that nearly cancel carries their rounding error (matmuls, reductions, inputs x100). Finite
    elements only: one inf in the reference made it infinite, and every finite value passed."""
    return tol * max(1.0, output_rms(ref))


def compare_tensor(ref: Any, got: Any, policy: EvalPolicy) -> tuple[bool, str, float | None, float | None]:
    """(passed, message, max_abs_error, norm-wise relative error) for one output tensor."""
    import torch

    if isinstance(got, dict) and UNSUPPORTED in got:
        return False, f"output is a {got[UNSUPPORTED]}, expected a torch.Tensor", None, None
    if type(got) is not torch.Tensor:
        return False, f"output is a {type(got).__name__}, expected a torch.Tensor", None, None
    if got.shape != ref.shape:
        return False, f"output shape {tuple(got.shape)} != expected {tuple(ref.shape)}", None, None
    if got.dtype != ref.dtype:
        return False, f"output dtype {got.dtype} != expected {ref.dtype}", None, None
    if not got.dtype.is_floating_point and not got.dtype.is_complex:
        equal = bool(torch.equal(got, ref))
        return equal, "" if equal else "integer/bool output differs from the reference", None, None
    tol = tolerance_for(ref.dtype, policy)
    fast = _all_finite_close(ref, got, tol)
    if fast is not None:
        return fast
    return _careful(ref, got, tol)


def _all_finite_close(ref: Any, got: Any, tol: float) -> tuple[bool, str, float, float] | None:
    """The common case in a few passes (300 timed checks per evaluation go through here): both finite and every
    element within tolerance. Anything else (None) gets the careful float64 comparison and its message."""
    import torch

    if ref.is_complex() or not ref.numel() or not bool(torch.isfinite(ref).all()) or not bool(torch.isfinite(got).all()):
        return None
    exact = torch.float64 if ref.dtype == torch.float64 else torch.float32  # fp16/bf16/fp32 are exact in fp32
    ref32, got32 = ref.to(exact), got.to(exact)
    diff = (got32 - ref32).abs_()
    ref_norm = float(torch.linalg.vector_norm(ref32, dtype=torch.float64))
    diff_norm = float(torch.linalg.vector_norm(diff, dtype=torch.float64))
    atol = tol * max(1.0, ref_norm / ref.numel() ** 0.5)  # element_atol, from the norm this path needs anyway
    # a float32 margin of a few ulps: borderline elements go to the careful path, which decides in float64
    if not bool((diff <= (ref32.abs() * tol + atol) * (1 - 1e-5)).all()):
        return None
    rel = diff_norm / ref_norm if ref_norm > 0 else diff_norm
    if rel > tol * (1 - 1e-5):
        return None
    return True, "", float(diff.max()), rel


def _careful(ref: Any, got: Any, tol: float) -> tuple[bool, str, float | None, float | None]:
    import torch

    got64, ref64 = got.to(torch.float64), ref.to(torch.float64)
    mismatch = _non_finite_mismatch(ref64, got64)
    if mismatch:
        return False, mismatch, None, None
    finite = torch.isfinite(ref64)  # non-finite positions matched exactly above: the tolerance is for the rest
    diff, base = (got64 - ref64).abs()[finite], ref64[finite]
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = float(diff.norm() / base.norm()) if float(base.norm()) > 0 else float(diff.norm())
    atol = element_atol(ref64, tol)  # the norm-wise check below keeps the precision bar
    close = torch.isclose(got64, ref64, atol=atol, rtol=tol) | ~finite
    if not bool(close.all()):
        wrong = int((~close).sum())
        index = tuple(int(i) for i in (~close).nonzero()[0])
        return (False, f"{wrong} of {close.numel()} elements outside atol={atol:g} rtol={tol:g} (max abs error "
                f"{max_abs:.3g}; first at {index}: got {float(got64[index]):.6g}, expected "
                f"{float(ref64[index]):.6g})", max_abs, rel)
    if rel > tol:  # a small but systematic bias (e.g. a lower-precision path) fails here even inside atol
        return False, f"norm-wise relative error {rel:.3g} above {tol:g}", max_abs, rel
    return True, "", max_abs, rel


def _non_finite_mismatch(ref64: Any, got64: Any) -> str:
    """Infinities compare by equality: where either side is inf, the other must hold the same inf (same position,
    same sign). A reference that legitimately gives -inf (log of a zero) is judged like any other; a kernel that
    overflows where the reference does not fails. A NaN never passes (the reference refuses to give one)."""
    import torch

    if bool(torch.isnan(got64).any()):
        return f"output has {int(torch.isnan(got64).sum())} NaN values"
    odd = ~torch.isfinite(ref64) | ~torch.isfinite(got64)
    if not bool(odd.any()):
        return ""
    wrong = odd & (got64 != ref64)
    if not bool(wrong.any()):
        return ""
    index = tuple(int(i) for i in wrong.nonzero()[0])
    return (f"{int(wrong.sum())} non-finite values differ from the reference's (first at {index}: got "
            f"{float(got64[index]):.6g}, expected {float(ref64[index]):.6g})")


def compare_trial(seed: int, reference: Any, candidate: Any, policy: EvalPolicy) -> TrialResult:
    refs, gots = _flatten(reference), _flatten(candidate)
    if len(refs) != len(gots):
        return TrialResult(seed=seed, passed=False,
                           message=f"forward returned {len(gots)} outputs, expected {len(refs)}")
    worst_abs, worst_rel = 0.0, 0.0
    for position, (ref, got) in enumerate(zip(refs, gots)):
        passed, message, max_abs, rel = compare_tensor(ref, got, policy)
        worst_abs = max(worst_abs, max_abs or 0.0)
        worst_rel = max(worst_rel, rel or 0.0)
        if not passed:
            prefix = f"output {position}: " if len(refs) > 1 else ""
            return TrialResult(seed=seed, passed=False, message=prefix + message,
                               max_abs_error=max_abs, max_rel_error=rel)
    return TrialResult(seed=seed, passed=True, max_abs_error=worst_abs, max_rel_error=worst_rel)
