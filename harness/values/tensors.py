"""Small tensor helpers shared by the parent (reference) and the child (candidate)."""

from __future__ import annotations

from typing import Any

UNSUPPORTED = "__unsupported_output_type__"
NOT_PLAIN = "not a plain dense CPU tensor"  # how an output the parent cannot read directly is described


def to_device(values: list[Any], device: str) -> list[Any]:
    import torch

    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def cloned(values: list[Any]) -> list[Any]:
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def portable(output: Any, copy: bool = False) -> Any:
    """Outputs as the parent compares them: tensors detached on the CPU (`copy`: never the candidate's own
    memory, which a later call may overwrite), lists kept, anything else by name."""
    import torch

    if isinstance(output, torch.Tensor):
        return output.detach().to("cpu", copy=copy)
    if isinstance(output, (tuple, list)):
        return [portable(item, copy) for item in output]
    return {UNSUPPORTED: type(output).__name__}


def values_at(tensor: Any, positions: list[int]) -> list[float]:
    """The values at `positions` (modulo its size) of a flattened tensor, as floats (complex: magnitudes), read
    in one gather: the probe of a timed call's output."""
    import torch

    flat = tensor.detach().reshape(-1)
    if not flat.numel():
        return []
    index = torch.tensor([p % flat.numel() for p in positions], dtype=torch.long, device=flat.device)
    picked = flat[index]
    return (picked.abs() if picked.is_complex() else picked).double().tolist()


def nbytes(values: list[Any]) -> int:
    """The bytes of the tensors among `values`."""
    return sum(v.numel() * v.element_size() for v in values if hasattr(v, "element_size"))
