"""A problem at reduced precision (`--precision fp16|bf16`, as KernelBench's `precision` option): the reference's
parameters, buffers and floating-point inputs cast to the dtype, by a few lines appended to the problem's own file,
so the reference, its trials, the canaries and the float64 oracle all see the same problem, and a candidate is
written against it. Outputs come out in that dtype, and the comparison's per-dtype tolerance is the one that applies
(harness/verification/compare.py `tolerance_for`: `atol_half`, 1e-2 as KernelBench's, for float16 and bfloat16;
`atol_fp32` otherwise): nothing else needs to choose it.
"""

from __future__ import annotations

from typing import Literal

from kernelbench.problem import Problem

Precision = Literal["fp32", "fp16", "bf16"]
DTYPES: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}

_CAST = '''

# kernelwright: run at {dtype} (--precision {precision}): parameters, buffers and floating-point inputs cast
import torch as _kw_torch

_kw_Model, _kw_get_inputs = Model, get_inputs


class Model(_kw_Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.to(_kw_torch.{dtype})


def get_inputs():
    return [v.to(_kw_torch.{dtype}) if isinstance(v, _kw_torch.Tensor) and v.is_floating_point() else v
            for v in _kw_get_inputs()]
'''


def at_precision(problem: Problem, precision: Precision) -> Problem:
    """`problem` run at `precision` (the problem itself for fp32); ValueError for a precision not in DTYPES."""
    if precision not in DTYPES:
        raise ValueError(f"precision {precision!r}: one of {', '.join(DTYPES)}")
    if precision == "fp32":
        return problem
    source = problem.source.rstrip("\n") + "\n" + _CAST.format(dtype=DTYPES[precision], precision=precision)
    return Problem(name=f"{problem.name}_{precision}", source=source, level=problem.level,
                   problem_id=problem.problem_id)

