"""Which device an evaluation runs on, and what that means on this machine."""

from __future__ import annotations

import shutil
from typing import Literal, get_args

Device = Literal["auto", "cpu", "cuda", "cuda-compile-only"]
"""A device as a user names it; `resolve_device` turns `auto` into the one that runs here (never `auto`)."""
DEVICES: tuple[Device, ...] = get_args(Device)


class DeviceError(ValueError):
    """The requested device cannot be used here; the message says what to do instead."""


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def resolve_device(requested: str) -> str:
    """`auto` -> cuda when a GPU is visible, else cpu. `cuda` without a GPU -> compile-only if nvcc exists."""
    if requested not in DEVICES:
        raise DeviceError(f"unknown device {requested!r}: choose one of {', '.join(DEVICES)}")
    if requested == "auto":
        return "cuda" if cuda_available() else "cpu"
    if requested == "cuda" and not cuda_available():
        if shutil.which("nvcc"):
            return "cuda-compile-only"
        raise DeviceError("--device cuda: no CUDA GPU is visible and nvcc is not on PATH; "
                          "use --device cpu, or install the CUDA toolkit for compile-only checks")
    if requested == "cuda-compile-only" and not shutil.which("nvcc"):
        raise DeviceError("--device cuda-compile-only needs nvcc on PATH")
    return requested


def device_notice(requested: str, resolved: str) -> str | None:
    """What a user should be told when the device they asked for is not the one that will run."""
    if requested == "cuda" and resolved == "cuda-compile-only":
        return ("--device cuda: no GPU is visible here, so this is a compile-only check (nvcc): kernels are "
                "built and their resources reported, but nothing runs, so nothing is verified or timed")
    return None
