"""Runtime integrity checks that run in the child around each candidate call. They only *observe* and report
facts (as short strings keyed by check name); the parent decides what they mean."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Iterable

_sleep = time.sleep

# Modules whose functions the harness or the reference rely on; any replacement is tampering.
_WATCHED_MODULES = ("torch", "torch.nn.functional", "torch.cuda", "time", "builtins", "json", "os", "math")
_WATCHED_CLASSES = ("torch.Tensor", "torch.nn.Module", "torch.cuda.Event")


def _resolve(path: str) -> Any:
    import importlib

    module_path, _, attribute = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module_path), attribute)


def identity_snapshot() -> dict[str, int]:
    """id() of every callable in the watched modules and classes (no lazy attribute is triggered)."""
    snapshot: dict[str, int] = {}
    for path in _WATCHED_MODULES + _WATCHED_CLASSES:
        owner = _resolve(path)
        for name, value in list(vars(owner).items()):
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                snapshot[f"{path}.{name}"] = id(value)
    return snapshot


def replaced_since(before: dict[str, int]) -> list[str]:
    after = identity_snapshot()
    return sorted(name for name, ident in before.items() if after.get(name) != ident)


def os_thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def thread_state() -> dict[str, int]:
    import torch

    return {"python_threads": threading.active_count(), "os_threads": os_thread_count(),
            "torch_threads": torch.get_num_threads()}


def _storages(values: Iterable[Any]) -> list[tuple[int, int]]:
    import torch

    spans = []
    for value in values:
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            storage = value.untyped_storage()
            if storage.nbytes():
                spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    return spans


def overlaps(a: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(a[0] < end and start < a[1] for start, end in spans)


def shares_memory(a: Any, b: Any) -> bool:
    """Whether any tensor of output `a` lies in the memory of any tensor of output `b`."""
    theirs = _storages(flatten(b))
    return any(overlaps(span, theirs) for span in _storages(flatten(a)))


def flatten(output: Any) -> list[Any]:
    if isinstance(output, (tuple, list)):
        return [item for part in output for item in flatten(part)]
    return [output]


def output_problems(output: Any, device: str, inputs: list[Any], model: Any, earlier: list[Any]) -> list[str]:
    """Outputs must be plain, dense, materialized tensors on the device that share no memory with the inputs,
    the model's parameters or outputs the candidate returned before."""
    import torch

    problems = []
    guarded = _storages(inputs)
    owned = _storages(list(model.parameters()) + list(model.buffers()))
    previous = _storages(earlier)
    for index, item in enumerate(flatten(output)):
        where = f"output {index}"
        if not isinstance(item, torch.Tensor):
            continue  # reported by the comparison in the parent
        if type(item) is not torch.Tensor:
            problems.append(f"output-type: {where} is a {type(item).__module__}.{type(item).__name__}, a tensor "
                            "subclass (it can compute lazily or lie about its values); return a plain torch.Tensor")
            continue
        if item.layout != torch.strided or item.is_sparse or item.device.type == "meta":
            problems.append(f"output-type: {where} is not a dense materialized tensor ({item.layout}, "
                            f"{item.device})")
            continue
        if item.device.type != device:
            problems.append(f"output-type: {where} is on {item.device}, expected {device}")
        spans = _storages([item])
        if spans and overlaps(spans[0], guarded):
            problems.append(f"aliasing: {where} shares memory with an input")
        elif spans and overlaps(spans[0], owned):
            problems.append(f"aliasing: {where} shares memory with the model's parameters or buffers")
        elif spans and overlaps(spans[0], previous):
            problems.append(f"aliasing: {where} reuses the memory of an earlier call's output, which it overwrites")
    return problems


def fingerprint(output: Any) -> list[float]:
    import torch

    sums = []
    for item in flatten(output):
        if isinstance(item, torch.Tensor) and type(item) is torch.Tensor and item.numel() and item.device.type != "meta":
            data = item.detach()
            sums.append(float(torch.nan_to_num(data.double()).abs().sum()) + float(data.isnan().sum()))
    return sums


def returned_fingerprint(output: Any, device: str) -> list[float]:
    """Checksums of an output right after forward() returned (its current stream done)."""
    import torch

    if device == "cuda":
        torch.cuda.current_stream().synchronize()
    return fingerprint(output)


def still_changing(returned: list[tuple[Any, list[float]]], device: str) -> bool:
    """After a device-wide sync and one pause, did any output's checksums move since its call returned? Then
    something (another thread or stream) was still writing it. One pause for all of a phase's calls: each output
    is watched at least as long as with a pause per call (the earlier ones longer)."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    _sleep(0.005)
    return any(fingerprint(output) != first for output, first in returned)


def inputs_changed(pristine: list[Any], used: list[Any]) -> list[int]:
    import torch

    changed = []
    for index, (a, b) in enumerate(zip(pristine, used)):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or not torch.equal(torch.nan_to_num(a), torch.nan_to_num(b.to(a.device))):
                changed.append(index)
    return changed
