"""Which of PyTorch's own operators a forward runs outside the candidate's kernels, and for how long (runs in the
candidate's process, on one extra call the parent asks for by name: a hint about an honest model's forward, not a
defence against a hostile one, which can behave differently on that call).

Static reading of `forward` misses compute reached through `super().forward()`, helpers and closures; at run time
every aten operator passes the dispatcher, so a TorchDispatchMode sees it. Operators called while one of the
candidate's own functions runs (the kernel switch's depth) are library compute too, counted apart (`INSIDE`): a
pybind function's ATen calls pass the mode as they are; a dispatched (stable-ABI) operator runs with the mode
popped, so it is redispatched to its backend under a census of its own, which its C++ calls into the dispatcher
(`torch::stable::matmul`, `torch_call_dispatcher` with any name) pass. Views, allocation and copies are
bookkeeping, not compute. Each counted operator's work is added up as FLOPs (`op_flops`): the kernels' share of
the work (harness/decision/gates.py runtime_compute) is what the library did not do, whatever the time said. A tensor
handed to another library (`.numpy()`, `__array__`, DLPack) and back is counted by name (`LEFT`): what that library
computed is work no census can measure, so the kernels are credited none of the work (work_share.py).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from harness.verification.bookkeeping import BOOKKEEPING
from kernelbench import op_work

INSIDE = " inside the kernel"  # the name suffix of an operator the candidate's own function called
LEFT = " (left PyTorch)"  # the name suffix of a tensor handed to another library's compute (NumPy's BLAS...)
# Where a tensor leaves PyTorch, or an array comes back (torch's Python-level entry points, wrapped once per process
# before the candidate is imported, so a reference the candidate saves is the wrapper): what NumPy computes in
# between dispatches no operator, so no FLOP of it can be counted, and no work share can be credited for it.
_EXITS = (("Tensor", "numpy"), ("Tensor", "__array__"), ("Tensor", "__dlpack__"), ("torch", "from_numpy"),
          ("torch", "from_dlpack"), ("torch", "to_dlpack"), ("torch.utils.dlpack", "to_dlpack"),
          ("torch.utils.dlpack", "from_dlpack"))
_LEAVING: dict[str, Any] = {"active": 0, "seen": {}}
_TORCH_NAMESPACES = {"aten", "prim", "prims", "_c10d_functional", "c10d", "quantized", "profiler"}
_COMPUTE_NAMESPACES = {"aten", "prims", "quantized"}  # PyTorch's operators that compute (a prims or quantized
# operator runs its ATen work with the census popped: it is counted as itself)


def _name(func: Any) -> tuple[str, str]:
    """(namespace, operator) of an OpOverload."""
    qualified = str(getattr(func, "__name__", func))
    schema = getattr(func, "_schema", None)
    full = schema.name if schema is not None else qualified  # "aten::addmm"
    namespace, _, op = full.partition("::")
    return namespace, op or qualified


def prepare() -> None:
    """Enter and leave an empty dispatch mode once, before the identity snapshot: the first use imports modules
    that rebind torch functions (`torch.manual_seed` among them), which would read as the candidate's doing."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Nothing(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    with Nothing():
        torch.zeros(1).add(1)
    op_work.prepare()  # torch's FLOP counter and decompositions, imported now for the same reason
    _watch_exits()


def _watch_exits() -> None:
    """Wrap the places a tensor leaves PyTorch (`_EXITS`) with a count that only a census reads (idempotent)."""
    import importlib

    import torch

    for owner_name, attribute in _EXITS:
        owner = torch.Tensor if owner_name == "Tensor" else importlib.import_module(owner_name)
        original = getattr(owner, attribute, None)
        if original is None or getattr(original, "_kw_exit", False):
            continue
        setattr(owner, attribute, _counted_exit(original, f"{owner_name}.{attribute}"))


def _counted_exit(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    import functools

    @functools.wraps(original)
    def exit_(*args: Any, **kwargs: Any) -> Any:
        if _LEAVING["active"]:
            _LEAVING["seen"][name] = _LEAVING["seen"].get(name, 0) + 1
        return original(*args, **kwargs)

    exit_._kw_exit = True  # type: ignore[attr-defined]
    return exit_


def census(call: Callable[[], Any], depth: Callable[[], int], timed: bool) -> tuple[Any, dict[str, Any]]:
    """Run `call` under the census; (its result, {"ops": {name: count}, "library_s": s}): the seconds spent in
    PyTorch's compute outside the candidate's functions (None where `timed` is off: a GPU's ops are asynchronous)."""
    with counting(depth, timed) as found:
        result = call()
    return result, found


def op_flops(func: Any, args: tuple, kwargs: dict[str, Any], out: Any) -> float:
    """An operator's work (kernelbench/op_work.py): a formula for the matrix-product family, one FLOP per element
    for linear work, a decomposition's operators, and for an operator no rule knows the most its shapes allow (a
    matrix product's): library work is counted by what it can compute, never as one FLOP per element by default."""
    return op_work.op_flops(func, args, kwargs, out, unknown="bound")


def _backend(args: tuple) -> Any:
    """The dispatch key a candidate's operator runs on for these arguments (None: no tensor, or a device the
    census does not redispatch on)."""
    import torch
    from torch.utils._pytree import tree_leaves

    device = next((t.device.type for t in tree_leaves(args) if isinstance(t, torch.Tensor)), None)
    key = {"cpu": torch._C.DispatchKey.CPU, "cuda": torch._C.DispatchKey.CUDA}.get(device or "")
    return torch._C.DispatchKeySet(key) if key is not None else None


@contextmanager
def counting(depth: Callable[[], int], timed: bool) -> Iterator[dict[str, Any]]:
    """The census over whatever runs inside (one call, or an audit batch among the timed calls): the dict it
    yields is filled when the block ends: `ops` {name: count} (names ending in `INSIDE` for the candidate's own
    functions' calls), `library_s` (outside them, where `timed`) and `library_flops` (all of them)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: dict[str, int] = {}
    spent = [0.0]
    flops = [0.0]
    found: dict[str, Any] = {}

    class Census(TorchDispatchMode):
        def __init__(self, inside: bool = False) -> None:
            super().__init__()
            self.inside = inside

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            namespace, op = _name(func)
            kwargs = kwargs or {}
            if namespace not in _TORCH_NAMESPACES and (depth() > 0 or self.inside):  # the candidate's operator
                backend = _backend(args)
                if backend is not None:
                    with Census(inside=True):  # its C++ calls into the dispatcher pass this census again
                        return func.redispatch(backend, *args, **kwargs)
            inside = self.inside or depth() > 0
            counted = namespace in _COMPUTE_NAMESPACES and op not in BOOKKEEPING
            started = time.perf_counter()
            result = func(*args, **kwargs)
            if counted:
                name = f"{namespace}.{op}" + (INSIDE if inside else "")
                counts[name] = counts.get(name, 0) + 1
                flops[0] += op_flops(func, args, kwargs, result)
                if not inside:
                    spent[0] += time.perf_counter() - started
            return result

    _LEAVING["active"] += 1
    seen_before = dict(_LEAVING["seen"])
    try:
        with Census():
            yield found
    finally:
        _LEAVING["active"] -= 1
        for name, count in _LEAVING["seen"].items():  # compute no census counts: named, never credited
            if count > seen_before.get(name, 0):
                counts[name + LEFT] = count - seen_before.get(name, 0)
        found.update(ops=counts, library_s=spent[0] if timed else None, library_flops=flops[0])
