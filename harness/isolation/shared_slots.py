"""A timed child's input slots in memory the parent maps too: a sealed memfd, one per child, so the parent writes
each call's inputs with a plain copy (process_vm_writev cost it 0.1-0.25 ms per MB, most of a cached evaluation's
overhead). The parent still writes only while the child is frozen, and still reads outputs from the child's own memory
(harness/isolation/remote_memory.py). The file cannot shrink or grow (sealed), so nothing the child does to it can make
the parent's mapping fault."""

from __future__ import annotations

import fcntl
import mmap
import os
from typing import Any

_ALIGN = 64
_SEALS = ("F_SEAL_SHRINK", "F_SEAL_GROW", "F_SEAL_SEAL")
Layout = list[list[list[int] | None]]  # per slot, per input: [offset, bytes] for a tensor, None for the rest


def _aligned(size: int) -> int:
    return (size + _ALIGN - 1) // _ALIGN * _ALIGN


def layout_for(inputs: list[Any], count: int) -> tuple[Layout, int]:
    """Where each tensor input of each of `count` slots lies in the file, and the file's size."""
    import torch

    offset, layout = 0, []
    for _ in range(count):
        slot: list[list[int] | None] = []
        for value in inputs:
            if isinstance(value, torch.Tensor):
                nbytes = value.numel() * value.element_size()
                slot.append([offset, nbytes])
                offset += _aligned(max(nbytes, 1))
            else:
                slot.append(None)
        layout.append(slot)
    return layout, max(offset, _ALIGN)


def supported() -> bool:
    return hasattr(os, "memfd_create") and all(hasattr(fcntl, seal) for seal in _SEALS)


class SharedSlots:
    """The parent's side: the file (its descriptor goes to the child) and a writable mapping of it."""

    def __init__(self, inputs: list[Any], count: int) -> None:
        self.layout, self.nbytes = layout_for(inputs, count)
        self.fd = os.memfd_create("kernelwright-slots", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, self.nbytes)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        self.mapping = mmap.mmap(self.fd, self.nbytes)

    def view(self, place: list[int], like: Any) -> Any:
        """The tensor `like` (its dtype and shape) at `place` ([offset, bytes]) of the parent's mapping."""
        return tensor_at(self.mapping, place, like)

    def close(self) -> None:
        try:
            self.mapping.close()
        except BufferError:  # a view is still alive somewhere: the mapping goes with the process
            pass
        os.close(self.fd)


def tensor_at(mapping: mmap.mmap, place: list[int], like: Any) -> Any:
    import torch

    offset, nbytes = place
    if not nbytes:
        return torch.empty(like.shape, dtype=like.dtype)
    raw = torch.frombuffer(mapping, dtype=torch.uint8, count=nbytes, offset=offset)
    return raw.view(like.dtype).view(like.shape)


def child_slots(fd: int, layout: Layout, inputs: list[Any]) -> list[list[Any]]:
    """The child's side: its input sets as tensors over the shared file (non-tensor inputs as they are)."""
    import warnings

    mapping = mmap.mmap(fd, os.fstat(fd).st_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [[tensor_at(mapping, place, value) if place is not None else value
                 for place, value in zip(slot, inputs)] for slot in layout]
