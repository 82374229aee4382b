"""The numerical contract: the reference run again in float64 on the same inputs (the oracle), and the error of
the candidate's outputs and of the reference's own outputs against it.

Today's tolerance says whether a candidate is close to the reference; the oracle says how close each of them is to
the exact answer, and it decides (`contract_finding`): a candidate whose error is more than `FACTOR` times the
reference's own (an error under `FLOOR_EPS` epsilons of the output's dtype counts as that floor, so an exact
reference does not refuse every honest rounding) is `incorrect`, inside the tolerance or not: it is a less accurate
computation than the one it replaces (an fp16 sum that reads 1/16 of its input, a term skipped because it is small
at the benchmark's size). The factor and floor per dtype come from measurements of honest reorderings
(benchmarks/oracle_factor.py, docs/verdicts.md). NaN/Inf parity stays with compare.py: the error here is over the
positions where the oracle is finite.

Everything here but `fp64_oracle` is a pure function of tensors; `fp64_oracle` runs a copy of the reference model
in the parent (the reference is trusted code), under the reference's thread budget.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Sequence

from harness.records import Check, Finding, Numerics, OracleError, Verdict
from harness.verification.reference import ReferenceRun, reference_threads

# Per output dtype: how many times the reference's own error a candidate may have, and the floor (in epsilons of
# the dtype) under which an error counts as that floor. Measured (benchmarks/oracle_factor.py, docs/verdicts.md):
# honest reorderings (blocked, pairwise, sequential float32 and float64 accumulation, fused multiply-add) of sums,
# matmuls and pointwise ops stay under these; reading 1/4 of an fp16 sum's input does not.
FACTOR: dict[str, float] = {"float64": 16.0, "float32": 8.0, "float16": 2.0, "bfloat16": 2.0}
FLOOR_EPS: dict[str, float] = {"float64": 1024.0, "float32": 64.0, "float16": 0.25, "bfloat16": 0.25}
_FALLBACK = ("float32", "float32")  # another floating dtype: float32's rule


def dtype_name(dtype: Any) -> str:
    """`torch.float16` -> 'float16' (a complex dtype by its real part's name)."""
    import torch

    if dtype.is_complex:
        dtype = torch.empty(0, dtype=dtype).real.dtype
    return str(dtype).removeprefix("torch.")


def floor_error(dtype: str, count: int = 1 << 30) -> float:
    """The error under which any error counts as this: the dtype's `FLOOR_EPS` epsilons, and for an output of few
    elements (`count`) 1/sqrt(count) epsilons (one honest element rounded to its other neighbour, one ulp off, is
    that much of a small output's norm)."""
    import torch

    name = dtype if dtype in FACTOR else _FALLBACK[0]
    return float(torch.finfo(getattr(torch, name)).eps) * max(FLOOR_EPS[name], max(count, 1) ** -0.5)


def allowed_error(reference_relative: float, dtype: str, factor: float | None = None, count: int = 1 << 30) -> float:
    """The most norm-wise relative error against float64 a candidate may have, with outputs of `dtype` (the
    smallest `count` elements), where the reference's own is `reference_relative`: `factor` (else the dtype's
    `FACTOR`) times the larger of that and the floor (`floor_error`)."""
    name = dtype if dtype in FACTOR else _FALLBACK[0]
    return (factor or FACTOR[name]) * max(reference_relative, floor_error(name, count))


class NumericalContract(Numerics):
    """Both errors against the oracle, or why there is no oracle (`skipped`); the record an evaluation keeps
    (`Numerics`, harness/records.py), with the finding it makes."""

    def finding(self) -> Finding | None:
        return contract_finding(self.candidate, self.reference, self.multiple)


@dataclass
class Oracle:
    """The reference's outputs in float64, per trial; `skipped` says why there are none."""

    outputs: list[Any] | None
    skipped: str | None = None


def _flatten(output: Any) -> list[Any]:
    if isinstance(output, (tuple, list)):
        return [item for part in output for item in _flatten(part)]
    return [output]


def _widened(value: Any) -> Any:
    """Floating tensors in float64 (complex in complex128), every tensor a copy (a reference that writes into its
    inputs never writes into the trial's); everything else as it is."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_complex():
            return value.to(torch.complex128, copy=True)
        return value.to(torch.float64, copy=True) if value.is_floating_point() else value.clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_widened(v) for v in value)
    return value


def _precise(output: Any) -> str | None:
    """Why `output` is no oracle (a floating output that did not come out in double), or None."""
    import torch

    tensors = [t for t in _flatten(output) if isinstance(t, torch.Tensor)]
    if not any(t.is_floating_point() or t.is_complex() for t in tensors):
        return "the reference has no floating-point output"
    low = sorted({str(t.dtype) for t in tensors if (t.is_floating_point() and t.dtype != torch.float64)
                  or (t.is_complex() and t.dtype != torch.complex128)})
    return f"the reference still returns {', '.join(low)} when run in float64 (it casts inside)" if low else None


def fp64_oracle(reference: ReferenceRun, threads: int = 1, trials: int | None = None) -> Oracle:
    """The reference model, copied and cast to float64, on the first `trials` trial inputs (all by default), cast
    to float64 too; its outputs on the CPU. Where the reference cannot run in double, `skipped` says so."""
    import torch

    from harness.values.tensors import portable

    if reference.model is None:
        return Oracle(None, "no reference model to run in float64")
    inputs = reference.trial_inputs[:trials] if trials is not None else reference.trial_inputs
    try:
        model = copy.deepcopy(reference.model).double()
    except Exception as exc:
        return Oracle(None, f"the reference model cannot be cast to float64: {type(exc).__name__}: {exc}")
    device = next((t.device for t in (*model.parameters(), *model.buffers())), torch.device("cpu"))
    outputs = []
    with reference_threads(threads), torch.no_grad():
        for trial in inputs:
            try:
                output = portable(model(*[v.to(device) if isinstance(v, torch.Tensor) else v
                                          for v in _widened(list(trial))]))
            except Exception as exc:
                return Oracle(None, f"the reference cannot run in float64: {type(exc).__name__}: {exc}")
            why = _precise(output)
            if why is not None:
                return Oracle(None, why)
            outputs.append(output)
    return Oracle(outputs)


def _tensor_error(got: Any, oracle: Any) -> OracleError | None:
    """max abs and norm-wise relative error over the oracle's finite positions, with got's dtype; None where they
    cannot be compared (not a tensor, another shape, not floating)."""
    import torch

    if type(got) is not torch.Tensor or not isinstance(oracle, torch.Tensor) or got.shape != oracle.shape:
        return None
    if not (got.is_floating_point() or got.is_complex()) or not (oracle.is_floating_point() or oracle.is_complex()):
        return None
    if got.is_complex() != oracle.is_complex():
        return None
    got64 = torch.view_as_real(got.to(torch.complex128)) if got.is_complex() else got.to(torch.float64)
    exact = torch.view_as_real(oracle.to(torch.complex128)) if oracle.is_complex() else oracle.to(torch.float64)
    eps, dtype = float(torch.finfo(got.real.dtype if got.is_complex() else got.dtype).eps), dtype_name(got.dtype)
    diff = got64 - exact  # never in place: got64 is the candidate's own tensor where it already is float64
    if not bool(torch.isfinite(exact).all()):  # the rare case: only where the oracle is finite
        finite = torch.isfinite(exact)
        diff, exact = diff[finite], exact[finite]
    if not diff.numel():
        return OracleError(max_abs=0.0, relative=0.0, eps=eps, dtype=dtype, count=1 << 30)
    diff.abs_()
    max_abs = float(diff.max())
    if not math.isfinite(max_abs):
        return OracleError(max_abs=float("inf"), relative=float("inf"), eps=eps, dtype=dtype, count=diff.numel())
    norm, error = float(torch.linalg.vector_norm(exact)), float(torch.linalg.vector_norm(diff))
    return OracleError(max_abs=max_abs, relative=error / norm if norm > 0 else error, eps=eps, dtype=dtype,
                       count=diff.numel())


def error_against(outputs: Sequence[Any], oracle: Sequence[Any]) -> OracleError | None:
    """The worst error of `outputs` (per trial: a tensor or a list of them) against the oracle's outputs of the
    same trials (the least precise output's dtype); None where nothing could be compared (another structure, shape
    or a non-floating output)."""
    worst: OracleError | None = None
    if len(outputs) != len(oracle):
        return None
    for got, exact in zip(outputs, oracle):
        gots, exacts = _flatten(got), _flatten(exact)
        if len(gots) != len(exacts):
            return None
        for g, e in zip(gots, exacts):
            measured = _tensor_error(g, e)
            if measured is None:
                continue
            if worst is None:
                worst = measured
            else:
                coarser = measured if measured.eps > worst.eps else worst
                worst = OracleError(max_abs=max(worst.max_abs, measured.max_abs),
                                    relative=max(worst.relative, measured.relative), eps=coarser.eps,
                                    dtype=coarser.dtype, count=min(worst.count, measured.count))
    return worst


def contract_finding(candidate_error: OracleError | None, reference_error: OracleError | None,
                     multiple: float | None = None) -> Finding | None:
    """`incorrect` `[oracle]` where the candidate's norm-wise error against float64 is more than `multiple` (else
    the output dtype's `FACTOR`) times the reference's own, an error under the dtype's floor counting as the floor
    (`allowed_error`); None where it is within, or where either error is unknown. A candidate outside today's
    tolerance was refused before this is asked; this refuses one inside it."""
    if candidate_error is None or reference_error is None:
        return None
    allowed = allowed_error(reference_error.relative, candidate_error.dtype, multiple, candidate_error.count)
    if candidate_error.relative <= allowed:
        return None
    factor = multiple or FACTOR.get(candidate_error.dtype, FACTOR[_FALLBACK[0]])
    floor = allowed / factor
    return Finding(Check.ORACLE, f"error against a float64 run of the reference is {candidate_error.relative:.3g} "
                   f"(norm-wise relative; max abs {candidate_error.max_abs:.3g}), the reference's own is "
                   f"{reference_error.relative:.3g} (max abs {reference_error.max_abs:.3g}): "
                   f"{candidate_error.relative / floor:.1f}x the larger of it and the {candidate_error.dtype} floor "
                   f"{floor:.3g}, over the {factor:g}x allowed. Inside the tolerance, but a less accurate "
                   "computation than the one it replaces (an approximation, a skipped term or a lower-precision "
                   "accumulation): compute every term, accumulating at least as precisely as the reference",
                   verdict=Verdict.INCORRECT)


def numerical_contract(reference: ReferenceRun, candidate_outputs: Sequence[Any], threads: int = 1,
                       multiple: float | None = None) -> NumericalContract:
    """The candidate's outputs (one per trial of `reference`, as compared) and the reference's own against the
    float64 oracle of the same trials."""
    trials = len(candidate_outputs)
    oracle = fp64_oracle(reference, threads, trials)
    if oracle.outputs is None:
        return NumericalContract(skipped=oracle.skipped, multiple=multiple)
    return NumericalContract(candidate=error_against(list(candidate_outputs), oracle.outputs),
                             reference=error_against(reference.outputs[:trials], oracle.outputs), multiple=multiple)


def skipped_note(contract: NumericalContract) -> Finding | None:
    """A note saying why the candidate was not held to the oracle, where it was not."""
    if contract.skipped is None:
        return None
    return Finding(Check.ORACLE, f"no float64 oracle: {contract.skipped}", fatal=False)


def bitwise_deterministic(outputs_a: Any, outputs_b: Any) -> bool:
    """Whether two runs' outputs are the same bits: same structure, dtypes, shapes and bytes (NaN payloads
    included). Anything that is not a tensor or a list of them compares by ==."""
    import torch

    if isinstance(outputs_a, (tuple, list)) or isinstance(outputs_b, (tuple, list)):
        return (isinstance(outputs_a, (tuple, list)) and isinstance(outputs_b, (tuple, list))
                and len(outputs_a) == len(outputs_b)
                and all(bitwise_deterministic(a, b) for a, b in zip(outputs_a, outputs_b)))
    if isinstance(outputs_a, torch.Tensor) or isinstance(outputs_b, torch.Tensor):
        if not (isinstance(outputs_a, torch.Tensor) and isinstance(outputs_b, torch.Tensor)):
            return False
        if outputs_a.dtype != outputs_b.dtype or outputs_a.shape != outputs_b.shape:
            return False
        return torch.equal(_bytes(outputs_a), _bytes(outputs_b))
    return bool(outputs_a == outputs_b)


def deterministic(trial_calls: Sequence[Sequence[Any]]) -> bool | None:
    """Whether every trial the candidate was called on more than once (the trials call one of them twice, on the
    same inputs: harness/measurement/frozen_trials.py) gave the same bits each time; None where none was."""
    repeated = [calls for calls in trial_calls if isinstance(calls, (list, tuple)) and len(calls) > 1]
    if not repeated:
        return None
    return all(bitwise_deterministic(calls[0], other) for calls in repeated for other in calls[1:])


def _bytes(tensor: Any) -> Any:
    import torch

    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.dtype != torch.bool else flat
