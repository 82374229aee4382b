"""Which of PyTorch's operators are bookkeeping (allocation, views, copies), not compute: what the compute census
(harness/child/census.py) and the binary's imports (binary_imports.py) leave out. The set lives with the operators'
work (kernelbench/op_work.py), which counts none of them."""

from kernelbench.op_work import BOOKKEEPING

__all__ = ["BOOKKEEPING"]
