"""Small tensor helpers shared by the parent (reference) and the child (candidate)."""

from __future__ import annotations

from typing import Any

UNSUPPORTED = "__unsupported_output_type__"


def to_device(values: list[Any], device: str) -> list[Any]:
    import torch

    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def cloned(values: list[Any]) -> list[Any]:
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def portable(output: Any) -> Any:
    """Outputs as the parent compares them: tensors detached on the CPU, lists kept, anything else by name."""
    import torch

    if isinstance(output, torch.Tensor):
        return output.detach().to("cpu")
    if isinstance(output, (tuple, list)):
        return [portable(item) for item in output]
    return {UNSUPPORTED: type(output).__name__}
