"""Which of PyTorch's own operators a forward runs outside the candidate's kernels, and for how long (runs in the
candidate's process, on one extra call the parent asks for by name: a hint about an honest model's forward, not a
defence against a hostile one, which can behave differently on that call).

Static reading of `forward` misses compute reached through `super().forward()`, helpers and closures; at run time
every aten operator passes the dispatcher, so a TorchDispatchMode sees it. Operators called while one of the
candidate's own functions runs (the kernel switch's depth) are the kernel's own business; views, allocation and
copies are bookkeeping, not compute.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

BOOKKEEPING = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "view", "_unsafe_view", "reshape",
    "expand", "permute", "transpose", "t", "contiguous", "as_strided", "slice", "select", "unsqueeze", "squeeze",
    "detach", "alias", "copy_", "clone", "_to_copy", "to", "lift_fresh", "lift_fresh_copy", "split", "chunk",
    "unbind", "flatten", "unflatten", "narrow", "view_as", "expand_as", "resize_", "set_", "fill_", "zero_",
    "_local_scalar_dense", "item", "is_same_size", "_reshape_alias", "split_with_sizes", "sym_size", "sym_stride",
    "sym_numel", "sym_storage_offset",
}


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


def census(call: Callable[[], Any], depth: Callable[[], int], timed: bool) -> tuple[Any, dict[str, Any]]:
    """Run `call` under the census; (its result, {"ops": {name: count}, "library_s": s}): the seconds spent in
    PyTorch's compute outside the candidate's functions (None where `timed` is off: a GPU's ops are asynchronous)."""
    with counting(depth, timed) as found:
        result = call()
    return result, found


@contextmanager
def counting(depth: Callable[[], int], timed: bool) -> Iterator[dict[str, Any]]:
    """The census over whatever runs inside (one call, or an audit batch among the timed calls): the dict it
    yields is filled when the block ends."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: dict[str, int] = {}
    spent = [0.0]
    found: dict[str, Any] = {}

    class Census(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            namespace, op = _name(func)
            counted = depth() == 0 and namespace == "aten" and op not in BOOKKEEPING
            started = time.perf_counter()
            result = func(*args, **(kwargs or {}))
            if counted:
                counts[f"aten.{op}"] = counts.get(f"aten.{op}", 0) + 1
                spent[0] += time.perf_counter() - started
            return result

    try:
        with Census():
            yield found
    finally:
        found.update(ops=counts, library_s=spent[0] if timed else None)
