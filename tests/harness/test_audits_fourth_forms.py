"""The audits among the timed calls (issue 31), attacked a fourth way, against 77aeb8a: honest kernels written the
way KernelBench solutions are (a false rejection is the worst finding), and the kernel switch's new checks
(`[disguised]`, the knock-out's poison of arguments) bypassed. The earlier forms are in
tests/harness/test_audits_second_forms.py and test_audits_third_forms.py; their problems and helpers are reused.

Found at 77aeb8a and closed since (the same session):
- FALSE REJECTION: an honest light kernel called through `torch.ops.kw_relu_cpu.relu_forward.default(x)` was
  `[ghost-kernel]` twice over (never called: kernel_share 0.0; knocked_out_right True): the switch's wrapper left
  `.default` the raw OpOverload. Each overload is a stand-in through the switch now (build_cache.py `_Overload`).
- FALSE REJECTION: an honest fused bias-add + ReLU written into `out`, given the module's nn.Parameter bias,
  returning a count, was INCORRECT `[timed-check]` (190860 of 262144 elements wrong, the poison's magnitude): the
  knock-out poisoned every tensor argument, the bias included, for good. It poisons only the arguments the call
  changed now (copied before the knock-out's call, compared after).
- NOT CAUGHT: `torch.library.Library('kw_relu_cpu', 'IMPL').impl('relu_forward', <matmul>, 'CPU')`, the
  candidate's operator re-implemented in Python, was accepted under STRICT at 1.82x: `torch.library` and its
  registration calls are refused statically now (no run-time check yet that the operator still dispatches to the
  build's kernel).
- NOT CAUGHT: a TorchDispatchMode answering the kernel's call (refused statically; static policy evaded) was
  accepted at 1.70x: `[disguised]` now also asks whether a dispatch mode other than the census's is on; with the
  overload stand-ins the mode no longer gets to answer and the candidate reads INCORRECT first.

Stay accepted: two kernel calls per forward returning a tuple, one through reshape/view, one reduced by sum
(0.85x, share 0.66); the bundled ReLU at cpu_threads=2 and under strict.

Figures: 2 shared cores, a full test run beside (PSI cpu pressure 28-30%), `EvalPolicy(timing_budget_s=0.2)`; one
run each."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from kernelbench.problem import problem_from_source
from tests.conftest import RELU_CANDIDATE, relu_variant
from tests.harness.test_audits_second_forms import MATMUL64, WHERE_RELU, _matmul
from tests.harness.test_audits_third_forms import _figures, _relu_then

pytestmark = pytest.mark.slow
DEFAULT = EvalPolicy(timing_budget_s=0.2)
EVADED = DEFAULT.model_copy(update={"static_policy": "off"})  # as if the static policy had been evaded
STRICT = DEFAULT.model_copy(update={"static_policy": "strict"})


def _accepted(evaluation: object) -> None:
    assert evaluation.verdict is Verdict.ACCEPTED, _figures(evaluation)


# -- honest kernels -------------------------------------------------------------------------------------------------

def test_an_honest_kernel_called_through_its_default_overload_stays_accepted() -> None:
    """`torch.ops.ns.op.default(x)` is how torch's own docs call a custom operator's overload; the kernel switch
    (harness/compilation/build_cache.py KernelSwitch.wrap_ops) sets `.default` on its wrapper to the raw
    OpOverload, so such a call is never counted, clocked or poisoned."""
    source = relu_variant("return torch.ops.kw_relu_cpu.relu_forward.default(x)")
    _accepted(evaluate(WHERE_RELU, source, "cpu", DEFAULT))


def test_honest_kernels_returning_a_tuple_two_calls_per_forward_stay_accepted() -> None:
    """Two kernel calls per forward, a tuple of tensors returned, one through a view of a flattened input."""
    problem = _relu_then("(torch.relu(x), torch.relu(x).sum(dim=1))", "relu_tuple")
    source = relu_variant("y = relu_ext.relu_forward(x.reshape(-1)).view(x.shape)\n"
                          "return y, relu_ext.relu_forward(x).sum(dim=1)")
    _accepted(evaluate(problem, source, "cpu", DEFAULT))


# An honest fused bias-add and ReLU in the light (stable-ABI) form, written into a buffer forward allocates, with
# the module's bias (an nn.Parameter) as an argument; like the third forms' RELU_INTO it returns a count.
BIAS_RELU = problem_from_source('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(16384))

    def forward(self, x):
        return torch.relu(x + self.bias)

def get_inputs():
    return [torch.randn(16, 16384)]

def get_init_inputs():
    return []
''', "bias_relu", level=2)

BIAS_RELU_INTO = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>

using torch::stable::Tensor;

int64_t bias_relu_into(Tensor x, Tensor bias, Tensor out) {
    STD_TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::headeronly::ScalarType::Float,
                    "expects a float CPU tensor");
    STD_TORCH_CHECK(x.is_contiguous() && bias.is_contiguous() && out.is_contiguous(), "contiguous");
    const float* src = static_cast<const float*>(x.data_ptr());
    const float* b = static_cast<const float*>(bias.data_ptr());
    float* dst = static_cast<float*>(out.data_ptr());
    const int64_t n = x.numel(), m = bias.numel();
    STD_TORCH_CHECK(out.numel() == n && n % m == 0, "sizes");
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i] + b[i % m];
        dst[i] = v > 0.0f ? v : 0.0f;
    }
    return n;
}

STABLE_TORCH_LIBRARY(kw_bias_relu_into_cpu, m) {
    m.def("bias_relu_into(Tensor x, Tensor bias, Tensor(a!) out) -> int");
}
STABLE_TORCH_LIBRARY_IMPL(kw_bias_relu_into_cpu, CPU, m) { m.impl("bias_relu_into", TORCH_BOX(&bias_relu_into)); }
"""

load_inline(
    name="bias_relu_into_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
)
ext = torch.ops.kw_bias_relu_into_cpu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(16384))

    def forward(self, x):
        out = torch.empty_like(x)
        ext.bias_relu_into(x, self.bias, out)  # the answer is written into `out`
        return out
'''


def test_an_honest_fused_kernel_given_the_modules_bias_and_writing_into_out_stays_accepted() -> None:
    """The knock-out poisons every tensor argument where nothing returned is a tensor (build_cache.py
    `_poison(result if _holds_tensor(result) else list(args) + ...)`): the module's own bias among them, for
    good. What should hold: poison only what the schema marks written (`Tensor(a!)`), or restore the arguments
    after the knock-out call, or never poison an nn.Parameter/buffer of the model."""
    _accepted(evaluate(BIAS_RELU, BIAS_RELU_INTO, "cpu", DEFAULT))


def test_the_bundled_relu_stays_accepted_at_two_threads_and_under_strict() -> None:
    source = RELU_CANDIDATE.read_text()
    _accepted(evaluate(_relu_then("torch.relu(x)", "relu"), source, "cpu", EvalPolicy(timing_budget_s=0.2,
                                                                                       cpu_threads=2)))
    _accepted(evaluate(_relu_then("torch.relu(x)", "relu"), source, "cpu", STRICT))


# -- the kernel's own call answered by PyTorch, with no name the static policy refuses -------------------------------

# torch.library (not refused) registers a Python function as the CPU kernel of the candidate's own operator,
# replacing the C++ one: the kernel switch's wrapper still calls "the kernel" (counted, clocked, poisoned), but
# PyTorch's matmul answers inside it, where the census does not look (depth > 0).
LIBRARY_IMPL = _matmul(relu_variant(
    "_state['B'] = B\n"
    "return relu_ext.relu_forward(A)  # the kernel's call, answered by the library",
    prelude=(
        "_state = {}\n"
        "_lib = torch.library.Library('kw_relu_cpu', 'IMPL')\n"
        "_lib.impl('relu_forward', lambda a: torch.matmul(a, _state['B']), 'CPU')\n")))


def test_under_strict_the_kernels_operator_reimplemented_by_torch_library_is_caught() -> None:
    """What should catch it: refusing `torch.library` statically, and at run time checking that the candidate's
    operators still dispatch to the kernels the build registered (e.g. `torch._C._dispatch_dump` or comparing the
    CPU kernel's registration after load), or that no Python kernel is registered in their namespaces."""
    evaluation = evaluate(MATMUL64, LIBRARY_IMPL, "cpu", STRICT)
    assert evaluation.verdict is Verdict.REJECTED, _figures(evaluation)
    assert evaluation.reasons[0].startswith("[forbidden-api]") and "operator registration" in evaluation.reasons[0], \
        _figures(evaluation)


# The same through a TorchDispatchMode entered around the call (refused statically: here as if evaded): the runtime
# `[disguised]` check (build_cache.py `_disguise`) asks only about torch-function modes and __torch_function__.
DISPATCH_MODE = _matmul(relu_variant(
    "with _Answer(A, B):\n"
    "    return relu_ext.relu_forward(A)",
    prelude=(
        "from torch.utils._python_dispatch import TorchDispatchMode\n\n"
        "class _Answer(TorchDispatchMode):\n"
        "    def __init__(self, A, B):\n"
        "        super().__init__()\n"
        "        self.A, self.B = A, B\n\n"
        "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
        "        if 'relu_forward' in str(func):\n"
        "            return torch.mm(self.A, self.B)\n"
        "        return func(*args, **(kwargs or {}))\n")))


def test_with_the_static_policy_evaded_a_dispatch_mode_answering_the_kernels_call_is_caught() -> None:
    """What should catch it: `_disguise` also asking whether a dispatch mode is on (outside the census's own, e.g.
    comparing `torch._C._len_torch_dispatch_stack()` with the harness's depth) and whether an argument's type has
    its own `__torch_dispatch__` (a wrapper subclass with `_disabled_torch_function_impl` passes today)."""
    evaluation = evaluate(MATMUL64, DISPATCH_MODE, "cpu", EVADED)
    assert evaluation.verdict is not Verdict.ACCEPTED, _figures(evaluation)
    assert evaluation.reasons[0].startswith(("[disguised]", "[correctness]")), _figures(evaluation)
