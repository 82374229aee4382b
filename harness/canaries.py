"""Per-problem canaries: trivial outputs (zeros, ones, the input passed through, a constant mean) must fail
every problem. One that passes means the check is degenerate for that problem (KernelBench's tiny outputs
that zeros match, ReLU on non-negative inputs that identity matches)."""

from __future__ import annotations

from typing import Any, Callable

from harness.compare import compare_trial
from harness.policy import EvalPolicy
from harness.reference import ReferenceRun


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


def canary_outputs(ref: Any, inputs: list[Any]) -> dict[str, Any]:
    import torch

    def mean(t: Any) -> Any:
        return torch.full_like(t, float(t.double().mean())) if t.is_floating_point() else torch.zeros_like(t)

    return {"zeros": _map(ref, torch.zeros_like), "ones": _map(ref, torch.ones_like),
            "passthrough": _map(ref, _passthrough(inputs)), "constant-mean": _map(ref, mean)}


def passing_canaries(reference: ReferenceRun, policy: EvalPolicy) -> list[str]:
    """Names of the canaries that pass every trial of this problem."""
    passing: dict[str, int] = {}
    for seed, inputs, ref in zip(reference.trial_seeds, reference.trial_inputs, reference.outputs):
        for name, output in canary_outputs(ref, inputs).items():
            if _has_none(output):
                continue
            if compare_trial(seed, ref, output, policy).passed:
                passing[name] = passing.get(name, 0) + 1
    return [name for name, count in passing.items() if count == len(reference.outputs)]


def _has_none(output: Any) -> bool:
    if isinstance(output, list):
        return any(_has_none(item) for item in output)
    return output is None
