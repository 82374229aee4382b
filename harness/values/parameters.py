"""State a shortcut cannot rely on: no property of a model's initial values survives into the trials.

Structured state -- one value everywhere (a zero bias, a zero-initialised projection, LayerNorm's weight of ones, a
zero running mean or shift buffer) or two values (an identity from nn.init.eye_, a 0/1 pattern) -- is a point a
trained model never sits at, and a kernel that skips the matmul a zero or identity weight stands for, or the add a
zero buffer stands for, passed every trial made at init (accepted at 3.3-3.6x, 7.5x and 1.24x before, issue 44): it
is redrawn around its init scale. State drawn at random has structure too, shared by every draw of its init: an
orthogonal weight (nn.init.orthogonal_: a tied product W W^T is the identity), a low-rank one (a merged adapter U V),
symmetric, sorted, rows of unit norm; a kernel that skips the tied product (accepted at 4.72-16.1x) or multiplies
through the init's own rank-8 factors (1.77-5.01x) passed every trial as well. So every other floating parameter of
`_MIN_ELEMENTS` or more is redrawn i.i.d. from a normal of its own mean and std (folded at zero where the init is
non-negative: a scale stays a scale, a variance stays positive), as are buffers and plain tensor attributes whose
values depend on the init seed (`seeded`: a random buffer or initial state); only the init's scale survives.

Left alone: buffers and attributes the same under every seed with more than one value (a causal mask, a DCT matrix,
positional encodings: the operator's definition, which a checkpoint carries unchanged), integer state (counters,
indices) and boolean masks of two values, non-finite state, and tensors of fewer than `_MIN_ELEMENTS` elements (a scalar constant
in tensor form: no structure to rely on). A plain tensor attribute (`self.gain = torch.ones(n)`, in no state dict)
of one value is redrawn like a constant buffer, and a boolean buffer of one value (an all-True pruning mask) with
a quarter of its entries flipped.

The parent redraws (`redraw`) for every hardened evaluation (the reference's trials, the candidate's, every timed
call); where the reference's output is not finite with everything redrawn, it redraws the structured state only,
else keeps the init (harness/verification/reference.py says which). The children of both sides set the same
values by name after construction (`assign`); a random tensor travels as its recipe (a seed, a mean, a std and a
fingerprint of its init values), so a large model's payload stays small. A candidate that holds the state under
another name (a parameter or a buffer) is matched by shape and its init values; one that holds it nowhere, or
only as a copy derived in __init__ (a transposed or packed weight), keeps its own and fails the trials where the
value matters: a user's trained weights would fail it too."""

from __future__ import annotations

import zlib
from typing import Any

_SPREAD = 0.5  # a non-zero constant c is redrawn uniformly in c * [1 - spread, 1 + spread]
_MASK_KEPT = 0.75  # a constant boolean mask is redrawn with this share of its init value
_SAMPLE = 64  # elements read first: an ordinary random init shows three values there, and the full scan is skipped
_MIN_ELEMENTS = 4  # state from this many elements on (fewer: a scalar constant in tensor form)


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
    buffer, so in no state dict), of `_MIN_ELEMENTS` elements or more, leaves that own their memory (a view of a
    parameter is that parameter), by name; a one-element tensor is a scalar constant, a literal in tensor form."""
    import torch

    found = {}
    for prefix, module in model.named_modules():
        for key, value in vars(module).items():
            if type(value) is torch.Tensor and value.is_floating_point() and value.numel() >= _MIN_ELEMENTS \
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


def _constant_masks(model: Any) -> list[str]:
    """Boolean buffers of one value and `_MIN_ELEMENTS` or more (an all-True pruning mask): a trained, pruned
    model's mask is not constant, and a kernel that skips the multiply by it passed every trial (accepted at 1.38x,
    issue 44). Integer state is left: counters and indices whose redraw would change what the operator is."""
    import torch

    return [name for name, tensor in model.named_buffers() if tensor.dtype == torch.bool
            and tensor.numel() >= _MIN_ELEMENTS and bool((tensor == tensor.reshape(-1)[0]).all())]


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


def _seeded_candidates(model: Any) -> list[str]:
    """Floating buffers and plain tensor attributes a seed could have drawn: neither structured nor tiny."""
    parameters = {name for name, _ in model.named_parameters()}
    return [name for name, tensor in _state(model).items() if name not in parameters
            and tensor.is_floating_point() and tensor.numel() >= _MIN_ELEMENTS and _values(tensor) is None]


def needs_twin(model: Any) -> bool:
    """Whether `seeded` must look at a twin: the model holds buffers or attributes that may be random."""
    return bool(_seeded_candidates(model))


def seeded(model: Any, twin: Any) -> set[str]:
    """The buffers and plain tensor attributes of `model` that differ in `twin` (the same Model built under another
    seed): drawn at random at init, so state a trained or reloaded model holds other values of."""
    import torch

    theirs = _state(twin)
    return {name for name in _seeded_candidates(model) if name in theirs and theirs[name].shape ==
            _state(model)[name].shape and not torch.equal(_state(model)[name].detach().cpu(),
                                                          theirs[name].detach().cpu())}


def _random(model: Any, structured: dict[str, list[float]], seeded_names: set[str]) -> list[str]:
    """The state to redraw i.i.d.: every other floating parameter, and the seeded buffers and attributes, of
    `_MIN_ELEMENTS` or more, finite."""
    import torch

    parameters = {name for name, _ in model.named_parameters()}
    return [name for name, tensor in _state(model).items()
            if name not in structured and (name in parameters or name in seeded_names)
            and tensor.is_floating_point() and tensor.numel() >= _MIN_ELEMENTS
            and _values(tensor) is None and bool(torch.isfinite(tensor.detach()).all())]


def _fingerprint(tensor: Any) -> list[float]:
    """Sums that tell a tensor's values (and their order) from another's: its sum, sum of squares, sum of
    absolute values and a position-weighted sum, in float64."""
    import torch

    flat = tensor.detach().reshape(-1).to("cpu", torch.float64)
    weights = torch.arange(flat.numel(), dtype=torch.float64).remainder_(7)
    return [float(flat.sum()), float(flat.pow(2).sum()), float(flat.abs().sum()), float(flat.mul(weights).sum())]


def _same_fingerprint(a: list[float], b: list[float]) -> bool:
    """Equal up to summation order (the children sum with other thread counts than the parent)."""
    total, squares = max(b[2], 1e-30), max(b[1], 1e-30)
    tolerances = (1e-9 * total, 1e-9 * squares, 1e-9 * total, 7e-9 * total)
    return all(abs(x - y) <= tolerance for x, y, tolerance in zip(a, b, tolerances))


def _recipe(name: str, tensor: Any, seed: int) -> dict[str, Any]:
    """How to draw `tensor` anew: a normal of its own mean and std (folded where it is non-negative), from a
    generator of its own seed (derived from the evaluation's and its name), with its init's fingerprint."""
    import torch

    flat = tensor.detach().reshape(-1).to("cpu", torch.float64)
    return {"init": None, "shape": list(tensor.shape), "dtype": str(tensor.dtype).removeprefix("torch."),
            "fingerprint": _fingerprint(flat),
            "draw": {"seed": (seed * 1_000_003 + zlib.crc32(name.encode())) % (1 << 62), "mean": float(flat.mean()),
                     "std": float(flat.std()), "fold": bool(flat.min() >= 0)}}


def value_of(drawn: dict[str, Any]) -> Any:
    """The redrawn values of an entry, on the CPU: its tensor, or drawn from its recipe (the same bits in every
    process: one generator per tensor, elementwise arithmetic only)."""
    import torch

    if "value" in drawn:
        return drawn["value"]
    spec, dtype = drawn["draw"], getattr(torch, drawn["dtype"])
    work = torch.float64 if dtype == torch.float64 else torch.float32
    generator = torch.Generator().manual_seed(spec["seed"])
    value = torch.randn(drawn["shape"], generator=generator, dtype=work).mul_(spec["std"]).add_(spec["mean"])
    return (value.abs_() if spec["fold"] else value).to(dtype)


def _shape_of(drawn: dict[str, Any]) -> tuple[int, ...]:
    return tuple(drawn["value"].shape) if "value" in drawn else tuple(drawn["shape"])


def redraw(model: Any, seed: int, everything: bool = True, seeded_names: set[str] | None = None
           ) -> dict[str, dict[str, Any]]:
    """Redraw `model`'s structured state around its init scale and, with `everything`, its other floating
    parameters and `seeded_names` i.i.d. at their own mean and std, in place (generators of `seed`, never torch's
    global one). Returns {name: {"init": the constant or None, "value": the new tensor on the CPU,
    "original": the init tensor (two values only)} or a recipe (`_recipe`)} for the children to set too."""
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
        for name in _constant_masks(model):  # about a quarter of the entries flipped
            tensor = state[name]
            kept = bool(tensor.reshape(-1)[0])
            fresh = torch.rand(tensor.shape, generator=generator, dtype=torch.float64) < (
                _MASK_KEPT if kept else 1 - _MASK_KEPT)
            tensor.copy_(fresh.to(tensor.device))
            redrawn[name] = {"init": kept, "value": fresh}
        for name in _random(model, structured, seeded_names or set()) if everything else []:
            tensor = state[name]
            entry = _recipe(name, tensor, seed)
            tensor.copy_(value_of(entry).to(tensor.device))
            redrawn[name] = entry
    return redrawn


def _at_init(tensor: Any, drawn: dict[str, Any]) -> bool:
    """Whether a candidate's tensor holds the reference's init values (its shape already matches)."""
    import torch

    if isinstance(drawn["init"], bool):  # a constant mask
        return tensor.dtype == torch.bool and bool((tensor == drawn["init"]).all())
    if drawn["init"] is not None:
        return _constant(tensor) == drawn["init"]
    if "fingerprint" in drawn:
        return tensor.is_floating_point() and str(tensor.dtype).removeprefix("torch.") == drawn["dtype"] and \
            _same_fingerprint(_fingerprint(tensor), drawn["fingerprint"])
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
            shape = _shape_of(drawn)
            target = name if name in state and tuple(state[name].shape) == shape else next(
                (other for other, p in state.items() if other not in used and other not in redrawn
                 and tuple(p.shape) == shape and _at_init(p, drawn)), None)
            if target is None:
                missing.append(name)
                continue
            used.add(target)
            state[target].copy_(value_of(drawn).to(device=state[target].device, dtype=state[target].dtype))
    return missing
