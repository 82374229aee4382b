"""State a shortcut cannot rely on: a parameter or buffer whose init values are structured -- one value everywhere
(a zero bias, a zero-initialised projection, LayerNorm's weight of ones, a zero running mean or shift buffer) or two
values (an identity from nn.init.eye_, a 0/1 pattern) -- is a point a trained model never sits at, and a kernel that
skips the matmul a zero or identity weight stands for, or the add a zero buffer stands for, passes every trial made
at init (accepted at 3.3-3.6x, 7.5x and 1.24x before, issue 44). The reference's structured state is redrawn around
its init scale for every hardened evaluation (the reference's trials, the candidate's and every timed call): the
parent redraws it (`redraw_structured`), the children of both sides set the same values by name after construction
(`assign`). State drawn at random at init is already fresh per evaluation (a secret init seed) and is left alone
(redrawing it would change nothing and cost time); so are buffers of two values (a causal mask is the operator's
definition, which a checkpoint carries unchanged) and non-floating state (counters, boolean masks). A plain tensor
attribute (`self.gain = torch.ones(n)`, in no state dict) of one value is redrawn like a constant buffer: a module
whose forward multiplies by it must be computed with it, whatever it holds (none of KernelBench's 270 problems
holds a constant one: its two plain attributes are random initial states); one of a single element is a scalar
constant and is left.

A candidate that holds the state under another name (a parameter or a buffer) is matched by shape and its init
values; one that holds it nowhere keeps its own value, and fails the trials where the value matters: a user's
trained weights would fail it too."""

from __future__ import annotations

from typing import Any

_SPREAD = 0.5  # a non-zero constant c is redrawn uniformly in c * [1 - spread, 1 + spread]
_SAMPLE = 64  # elements read first: an ordinary random init shows three values there, and the full scan is skipped
_ATTRIBUTE_MIN = 4  # a plain tensor attribute is state from this many elements on (fewer: a constant in tensor form)


def _values(tensor: Any) -> list[float] | None:
    """The distinct values (one or two, sorted) of a floating tensor made of at most two finite values, else None.
    Two values count only from four elements on (any two numbers are 'two values')."""
    import torch

    if not tensor.is_floating_point() or tensor.numel() == 0:
        return None
    flat = tensor.detach().reshape(-1)
    head = torch.unique(flat[:_SAMPLE])
    if head.numel() > 2 or not bool(torch.isfinite(head).all()):
        return None
    first = flat[0]
    other = flat[flat != first]
    if other.numel() == 0:
        return [float(first)]
    second = other[0]
    if flat.numel() < 4 or not bool(torch.isfinite(second)) or not bool((other == second).all()):
        return None
    return sorted([float(first), float(second)])


def _constant(tensor: Any) -> float | None:
    """The value of a floating tensor whose every element is the same, else None."""
    values = _values(tensor)
    return values[0] if values is not None and len(values) == 1 else None


def _state(model: Any) -> dict[str, Any]:
    """The model's parameters, buffers and plain tensor attributes (`_attributes`) by name (names never collide:
    one module attribute each)."""
    return {**dict(model.named_parameters()), **dict(model.named_buffers()), **_attributes(model)}


def _attributes(model: Any) -> dict[str, Any]:
    """Floating tensors a module holds as plain attributes (`self.gain = torch.ones(n)`: neither a parameter nor a
    buffer, so in no state dict), of `_ATTRIBUTE_MIN` elements or more, leaves that own their memory (a view of a
    parameter is that parameter), by name; a one-element tensor is a scalar constant, a literal in tensor form."""
    import torch

    found = {}
    for prefix, module in model.named_modules():
        for key, value in vars(module).items():
            if type(value) is torch.Tensor and value.is_floating_point() and value.numel() >= _ATTRIBUTE_MIN \
                    and not value.requires_grad and value._base is None:
                found[f"{prefix}.{key}" if prefix else key] = value
    return found


def _structured(model: Any) -> dict[str, list[float]]:
    """{name: its values} for the state to redraw: parameters of one or two values, buffers and plain tensor
    attributes of one value."""
    parameters = {name for name, _ in model.named_parameters()}
    found = {}
    for name, tensor in _state(model).items():
        values = _values(tensor)
        if values is not None and (len(values) == 1 or name in parameters):
            found[name] = values
    return found


def _zero_scale(name: str, tensor: Any, scales: dict[str, float]) -> float:
    """The rms a zero tensor is redrawn at: its layer's other parameters' (a zero bias beside a weight), else
    1/sqrt(fan in) for a matrix (the default init's), else the model's other parameters', else 1."""
    layer = name.rpartition(".")[0]
    siblings = [s for other, s in scales.items() if other.rpartition(".")[0] == layer and other != name]
    if siblings:
        return max(siblings)
    if tensor.dim() >= 2:
        return (tensor.numel() // tensor.shape[0]) ** -0.5
    return max(scales.values(), default=1.0) or 1.0


def _fresh(name: str, tensor: Any, values: list[float], scales: dict[str, float], generator: Any) -> Any:
    """New values around the init ones, in float64 on the CPU."""
    import torch

    unit = torch.rand(tensor.shape, generator=generator, dtype=torch.float64) * 2 - 1
    if len(values) == 1 and values[0] != 0.0:
        return values[0] * (1 + _SPREAD * unit)
    if len(values) == 1:
        return unit * (3 ** 0.5) * _zero_scale(name, tensor, scales)
    # two values (an identity, a 0/1 pattern): noise at the larger value's scale, per fan in for a matrix (the
    # identity's product then moves by O(1), as a trained residual weight's does)
    amplitude = max(abs(v) for v in values)
    init = tensor.detach().to(device="cpu", dtype=torch.float64)
    if tensor.dim() >= 2:
        return init + unit * (3 ** 0.5) * amplitude * (tensor.numel() // tensor.shape[0]) ** -0.5
    return init + unit * _SPREAD * amplitude


def redraw_structured(model: Any, seed: int) -> dict[str, dict[str, Any]]:
    """Redraw `model`'s structured parameters and constant buffers in place (a generator of `seed`, never torch's
    global one); returns {name: {"init": the constant or None, "original": the init tensor (two values only),
    "value": the new tensor on the CPU}} for the children to set too."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    state = _state(model)
    structured = _structured(model)
    scales = {name: float(p.detach().double().pow(2).mean().sqrt()) for name, p in model.named_parameters()
              if name not in structured and p.is_floating_point() and p.numel()}
    redrawn: dict[str, dict[str, Any]] = {}
    with torch.no_grad():
        for name, values in structured.items():
            tensor = state[name]
            fresh = _fresh(name, tensor, values, scales, generator).to(tensor.dtype)
            entry: dict[str, Any] = {"init": values[0] if len(values) == 1 else None, "value": fresh}
            if len(values) == 2:
                entry["original"] = tensor.detach().to("cpu").clone()
            tensor.copy_(fresh.to(tensor.device))
            redrawn[name] = entry
    return redrawn





def restore(model: Any, redrawn: dict[str, dict[str, Any]]) -> None:
    """Put the init values back (where the redrawn values break the reference)."""
    import torch

    state = _state(model)
    with torch.no_grad():
        for name, drawn in redrawn.items():
            if drawn["init"] is not None:
                state[name].fill_(drawn["init"])
            else:
                state[name].copy_(drawn["original"].to(state[name].device))


def _at_init(tensor: Any, drawn: dict[str, Any]) -> bool:
    """Whether a candidate's tensor holds the reference's init values (its shape already matches)."""
    import torch

    if drawn["init"] is not None:
        return _constant(tensor) == drawn["init"]
    original = drawn.get("original")
    return original is not None and tensor.is_floating_point() and torch.equal(
        tensor.detach().to("cpu", original.dtype), original)


def assign(model: Any, redrawn: dict[str, dict[str, Any]]) -> list[str]:
    """Set the redrawn values in `model` (a child's Model or ModelNew): by name and shape, else the first
    parameter, buffer or plain tensor attribute of that shape still at the init values. Returns the names nothing in `model` held."""
    import torch

    if not redrawn:
        return []
    state = _state(model)
    used: set[str] = set()
    missing = []
    with torch.no_grad():
        for name, drawn in redrawn.items():
            value = drawn["value"]
            target = name if name in state and state[name].shape == value.shape else next(
                (other for other, p in state.items() if other not in used and other not in redrawn
                 and p.shape == value.shape and _at_init(p, drawn)), None)
            if target is None:
                missing.append(name)
                continue
            used.add(target)
            state[target].copy_(value.to(device=state[target].device, dtype=state[target].dtype))
    return missing
