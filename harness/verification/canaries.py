"""Per-problem canaries: trivial outputs (zeros, ones, the input passed through, a constant mean) must fail
every problem. One that passes means the check is degenerate for that problem (KernelBench's tiny outputs
that zeros match, ReLU on non-negative inputs that identity matches)."""

from __future__ import annotations

from typing import Any, Callable

from harness.defences import is_off
from harness.policy import EvalPolicy
from harness.records import Finding
from harness.verification.clear_failure import passes
from harness.verification.reference import ReferenceRun
from harness.verification.ablation import degenerate_parts, prepare
from harness.verification.term_canaries import negligible_terms


def _map(output: Any, make: Callable[[Any], Any]) -> Any:
    if isinstance(output, list):
        return [_map(item, make) for item in output]
    return make(output)


def _passthrough(inputs: list[Any]) -> Callable[[Any], Any]:
    import torch

    def make(ref: Any) -> Any:
        for value in inputs:
            if isinstance(value, torch.Tensor) and value.shape == ref.shape and value.dtype == ref.dtype:
                return value.cpu().clone()
        return None  # no input has the output's shape: this canary does not apply

    return make


def _constant(value: float) -> Callable[[Any], Any]:
    import torch

    return lambda t: torch.full_like(t, value) if t.is_floating_point() else torch.zeros_like(t)


def canary_outputs(ref: Any, inputs: list[Any], constant: float) -> dict[str, Any]:
    """`constant` is the mean of the reference over *all* trials: an answer that ignores this trial's inputs
    (per-trial means would make a scalar output its own canary)."""
    import torch

    return {"zeros": _map(ref, torch.zeros_like), "ones": _map(ref, torch.ones_like),
            "passthrough": _map(ref, _passthrough(inputs)), "constant-mean": _map(ref, _constant(constant))}


def _overall_mean(outputs: list[Any]) -> float:
    import torch

    values = [t.double().mean() for out in outputs for t in _flat(out)
              if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
    return float(torch.stack(values).mean()) if values else 0.0


def _flat(output: Any) -> list[Any]:
    return [x for item in output for x in _flat(item)] if isinstance(output, list) else [output]


def passing_canaries(reference: ReferenceRun, policy: EvalPolicy, notes: list[Finding] | None = None) -> list[str]:
    """Names of the canaries that pass every trial of this problem: trivial outputs, else the reference without
    one of its terms (harness/verification/term_canaries.py), else the reference with one part's value replaced
    (harness/verification/ablation.py). The last two run many forwards: where the reference's is too slow for
    their budget, they run on a shrunk copy of the problem (same trial seeds and distributions); what could not
    be checked, or was checked only on the copy, goes to `notes` (never a silent skip). A trivial canary is
    dropped at its first failing trial (most fail the first)."""
    trivial = [] if is_off("trivial_canaries") else _trivial(reference, policy)
    if trivial or is_off("term_ablation"):
        return trivial
    prepared = prepare(reference, policy)
    target = prepared.target
    terms = negligible_terms(target.reference if target else reference, policy)
    if terms:
        return [f"{term}{target.where()}" if target else term for term in terms]
    report = degenerate_parts(reference, policy, prepared)
    if report.note and notes is not None:
        notes.append(report.note)
    return report.degenerate


def _trivial(reference: ReferenceRun, policy: EvalPolicy) -> list[str]:
    constant = _overall_mean(reference.outputs)
    alive: list[str] | None = None
    for seed, inputs, ref in zip(reference.trial_seeds, reference.trial_inputs, reference.outputs):
        outputs = canary_outputs(ref, inputs, constant)
        alive = [name for name in (outputs if alive is None else alive)
                 if not _has_none(outputs[name]) and passes(seed, ref, outputs[name], policy)]
        if not alive:
            return []
    return alive or []


def _has_none(output: Any) -> bool:
    if isinstance(output, list):
        return any(_has_none(item) for item in output)
    return output is None
