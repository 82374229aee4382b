"""How the child calls the model and waits for the device: the one way every call is made (correctness, knock-out,
census, timed), with torch's own device-wide synchronize bound before any candidate code runs."""

from __future__ import annotations

from typing import Any, Callable


def _no_sync() -> None:
    return None


DEVICE_SYNC: Callable[[], None] = _no_sync  # torch's own device-wide synchronize, bound before candidate code runs


def bind_device_sync(device: str) -> None:
    """Bind the C-level synchronize now: a candidate that replaces `torch.cuda.synchronize` (or the torch._C
    attribute) afterwards cannot shorten what the timed calls wait for."""
    global DEVICE_SYNC
    if device == "cuda":
        import torch

        DEVICE_SYNC = torch._C._cuda_synchronize


def sync(device: str) -> None:
    if device == "cuda":
        DEVICE_SYNC()


def call(model: Any, inputs: list[Any]) -> Any:
    import torch

    with torch.no_grad():
        return model(*inputs)
