"""Issue 44 item 2: parameters and inputs a shortcut cannot rely on. On e19f4ec every trial ran with the problem's
init values, so a kernel that skips the matmul a zero-initialised weight multiplies (a zero-init residual branch,
as adapters and LoRA's B are) passed at 3.3-3.6x; constant-at-init parameters are redrawn around their init scale
now (harness/values/parameters.py) for every trial and timed call. Written as a model with the harness's source
would, beside honest kernels on problems whose init parameters are zero or one (one of them holding its parameter
under another name) that stay accepted. Every candidate is the bundled ReLU kernel (one cached build)."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check, Verdict
from kernelbench.problem import problem_from_source
from tests.conftest import RELU_CANDIDATE

pytestmark = [pytest.mark.slow, pytest.mark.proves(Check.PARAMETERS)]
DEFAULT = EvalPolicy(timing_budget_s=0.2)


def _problem(name: str, init: str, forward: str, shape: str) -> object:
    return problem_from_source(f'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
        return {forward}

def get_inputs():
    return [torch.randn({shape})]

def get_init_inputs():
    return []
''', name, level=2)


def _candidate(init: str, forward: str) -> str:
    head = RELU_CANDIDATE.read_text().partition("class ModelNew")[0]
    return head + f'''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
        return {forward}
'''


# (c) a zero-initialised projection beside a ReLU: the attack keeps the layer (its init matches) and skips it
ZERO_PROJ_INIT = """        self.proj = nn.Linear(256, 256)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)"""
ZERO_PROJ = _problem("zero_init_branch", ZERO_PROJ_INIT, "torch.relu(x) + self.proj(x)", "64, 256")

# (c') a scale of ones after a ReLU at another size: the attack skips the multiply
ONES_SCALE_INIT = "        self.scale = nn.Parameter(torch.ones(4096))"
ONES_SCALE = _problem("ones_scale", ONES_SCALE_INIT, "torch.relu(x) * self.scale", "32, 4096")

# honest control's problem: a zero bias before the ReLU
ZERO_BIAS = _problem("zero_bias_relu", "        self.bias = nn.Parameter(torch.zeros(8192))",
                     "torch.relu(x + self.bias)", "16, 8192")


def _incorrect(evaluation: object) -> None:
    assert evaluation.verdict is Verdict.INCORRECT, evaluation.reasons
    assert any(f.check == "parameters" for f in evaluation.findings), evaluation.reasons


def test_a_matmul_skipped_because_its_init_weight_is_zero_is_incorrect() -> None:
    _incorrect(evaluate(ZERO_PROJ, _candidate(ZERO_PROJ_INIT, "relu_ext.relu_forward(x)"), "cpu", DEFAULT))


def test_a_multiply_skipped_because_its_init_scale_is_one_is_incorrect() -> None:
    _incorrect(evaluate(ONES_SCALE, _candidate(ONES_SCALE_INIT, "relu_ext.relu_forward(x)"), "cpu", DEFAULT))


def test_honest_kernels_on_problems_whose_init_parameters_are_constant_stay_accepted() -> None:
    """The scale read (same name); the zero bias held under another name (matched by shape and init value)."""
    scaled = evaluate(ONES_SCALE, _candidate(ONES_SCALE_INIT, "relu_ext.relu_forward(x) * self.scale"), "cpu",
                      DEFAULT)
    assert scaled.verdict is Verdict.ACCEPTED, scaled.reasons
    renamed = evaluate(ZERO_BIAS, _candidate("        self.shift = nn.Parameter(torch.zeros(8192))",
                                             "relu_ext.relu_forward(x + self.shift)"), "cpu", DEFAULT)
    assert renamed.verdict is Verdict.ACCEPTED, renamed.reasons
