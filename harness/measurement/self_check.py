"""The A/A candidate: the problem's own `Model`, timed through the whole candidate path (its own process, the
correctness trials, the knock-out-free timing rotation), so the right speedup is 1.00x and whatever an evaluation
prints beyond that is the harness's and the machine's noise (`kernelwright eval --self-check`).

It has no kernel of its own: an O(1) custom op on the output was tried first and read 0.92-0.95x on the bundled
16x16384 problems, the op's dispatch being 5-8% of a 40 us forward, which is a real cost, not noise. So its policy
drops the two checks that need a kernel (a built extension, the knock-out) and nothing else.
"""

from __future__ import annotations

from harness.policy import EvalPolicy
from kernelbench.problem import Problem

_SAME = '''

# --- kernelwright self-check: the reference itself, timed as a candidate ---
class ModelNew(Model):
    def forward(self, *args):
        return super().forward(*args)
'''


def self_check_source(problem: Problem) -> str:
    """A candidate file that is `problem` itself."""
    return problem.source.rstrip() + "\n" + _SAME


def self_check_policy(policy: EvalPolicy | None = None) -> EvalPolicy:
    """`policy` without the checks that need a kernel of the candidate's own (there is none to find)."""
    return (policy or EvalPolicy()).model_copy(update={"require_custom_kernel": False, "knockout": False})
