"""What the reference looks like to an exported op: its inputs', parameters' and outputs' shapes and dtypes and
its constructor's arguments, read by running it on the meta device (export_op and export_buckets both need it)."""

from __future__ import annotations

import itertools
import sys
import types
from typing import Any

from kernelbench.problem import Problem
from kernelwright.eval_service import UsageError

_counter = itertools.count()


class ExportError(UsageError):
    """What cannot be exported, and why (one line at the CLI, never a traceback)."""


def signatures(problem: Problem, source: str, sizes: dict[str, int] | None) -> dict[str, Any]:
    """The reference run on the meta device at `source`'s sizes: each input's [shape, dtype, contiguous], each
    parameter's and buffer's [shape, dtype], whether forward returns a tensor or a tuple of them, and its
    constructor's arguments (`init` as Python where they are literals, `init_key` to compare)."""
    import torch

    module = types.ModuleType(f"kernelwright_export_{next(_counter)}")
    where = f"{problem.key}" + (f" at {sizes}" if sizes else "")
    try:
        sys.modules[module.__name__] = module
        exec(compile(source, module.__name__, "exec"), module.__dict__)
        with torch.device("meta"), torch.no_grad():
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            output = model(*inputs)
    except Exception as exc:  # noqa: BLE001 - the reference's own failure, reported as what blocks the export
        raise ExportError(f"{where}: the reference cannot run on the meta device ({type(exc).__name__}: {exc}); "
                          "the op's fake implementation (what torch.compile traces) is computed that way") from None
    finally:
        sys.modules.pop(module.__name__, None)
    others = [type(x).__name__ for x in inputs if not isinstance(x, torch.Tensor)]
    if others:
        raise ExportError(f"{where}: get_inputs() returns non-tensor inputs ({', '.join(others)}); the op takes "
                          "tensors only")
    if isinstance(output, torch.Tensor):
        kind = "tensor"
    elif isinstance(output, (tuple, list)) and output and all(isinstance(t, torch.Tensor) for t in output):
        kind = "tensors"
    else:
        raise ExportError(f"{where}: Model.forward returns {type(output).__name__}; the op returns a tensor or a "
                          "tuple of tensors")

    def dtype(t: Any) -> str:
        return str(t.dtype).removeprefix("torch.")

    state = list(model.parameters()) + list(model.buffers())
    init = module.get_init_inputs()
    return {"sizes": sizes, "outputs": kind, "init": ", ".join(map(repr, init)) if _literal(init) else None,
            "init_key": repr(list(init)),  # the constructor's arguments: the op builds the kernel with its own
            "inputs": [[list(t.shape), dtype(t), t.is_contiguous()] for t in inputs],
            "state": [[list(t.shape), dtype(t)] for t in state]}


def _literal(value: Any) -> bool:
    """Whether repr(value) is Python that rebuilds it (for the README's constructor call)."""
    if isinstance(value, (list, tuple)):
        return all(_literal(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))
