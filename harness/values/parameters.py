"""Parameters a shortcut cannot rely on: a parameter that is the same value everywhere at init (a zero bias, a
zero-initialised projection, LayerNorm's weight of ones) is one point a trained model never sits at, and a kernel
that skips the matmul a zero weight multiplies passes every trial made at init (accepted at 3.3-3.6x before, issue
44). The reference's constant parameters are redrawn around their init scale for every hardened evaluation (the
reference's trials, the candidate's and every timed call): the parent redraws them (`redraw_constants`), the
children of both sides set the same values by name after construction (`assign`). Parameters drawn at random at
init are already fresh per evaluation (a secret init seed); buffers (running statistics) are left as they are.

A candidate that holds the parameter under another name is matched by shape and its init value; one that holds
it nowhere keeps its own value, and fails the trials where the value matters: a user's trained weights would
fail it too."""

from __future__ import annotations

from typing import Any

_SPREAD = 0.5  # a non-zero constant c is redrawn uniformly in c * [1 - spread, 1 + spread]


def _constant(tensor: Any) -> float | None:
    """The value of a floating tensor whose every element is the same, else None."""
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return None
    flat = tensor.detach().reshape(-1)
    first = float(flat[0])
    return first if bool((flat == flat[0]).all()) and first == first else None


def _zero_scale(name: str, tensor: Any, scales: dict[str, float]) -> float:
    """The rms a zero parameter is redrawn at: its layer's other parameters' (a zero bias beside a weight), else
    1/sqrt(fan in) for a matrix (the default init's), else the model's other parameters', else 1."""
    layer = name.rpartition(".")[0]
    siblings = [s for other, s in scales.items() if other.rpartition(".")[0] == layer and other != name]
    if siblings:
        return max(siblings)
    if tensor.dim() >= 2:
        return (tensor.numel() // tensor.shape[0]) ** -0.5
    return max(scales.values(), default=1.0) or 1.0


def redraw_constants(model: Any, seed: int) -> dict[str, dict[str, Any]]:
    """Redraw `model`'s constant parameters in place (a generator of `seed`, never torch's global one); returns
    {name: {"init": the constant, "value": the new tensor on the CPU}} for the children to set too."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    constants = {name: _constant(p) for name, p in params.items()}
    scales = {name: float(p.detach().double().pow(2).mean().sqrt()) for name, p in params.items()
              if constants[name] is None and p.is_floating_point() and p.numel()}
    redrawn: dict[str, dict[str, Any]] = {}
    with torch.no_grad():
        for name, value in constants.items():
            if value is None:
                continue
            p = params[name]
            unit = torch.rand(p.shape, generator=generator, dtype=torch.float64) * 2 - 1
            if value != 0.0:
                fresh = value * (1 + _SPREAD * unit)
            else:
                fresh = unit * (3 ** 0.5) * _zero_scale(name, p, scales)
            fresh = fresh.to(p.dtype)
            p.copy_(fresh.to(p.device))
            redrawn[name] = {"init": value, "value": fresh}
    return redrawn


def restore(model: Any, redrawn: dict[str, dict[str, Any]]) -> None:
    """Put the init constants back (where the redrawn values break the reference)."""
    import torch

    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, drawn in redrawn.items():
            params[name].fill_(drawn["init"])


def assign(model: Any, redrawn: dict[str, dict[str, Any]]) -> list[str]:
    """Set the redrawn values in `model` (a child's Model or ModelNew): by name and shape, else the first
    parameter of that shape still at the init constant. Returns the names nothing in `model` held."""
    import torch

    if not redrawn:
        return []
    params = dict(model.named_parameters())
    used: set[str] = set()
    missing = []
    with torch.no_grad():
        for name, drawn in redrawn.items():
            value = drawn["value"]
            target = name if name in params and params[name].shape == value.shape else next(
                (other for other, p in params.items() if other not in used and other not in redrawn
                 and p.shape == value.shape and _constant(p) == drawn["init"]), None)
            if target is None:
                missing.append(name)
                continue
            used.add(target)
            params[target].copy_(value.to(device=params[target].device, dtype=params[target].dtype))
    return missing
