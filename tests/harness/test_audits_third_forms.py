"""The audits among the timed calls (issues 31, 36), attacked a third way, as a hostile model that has read the
harness would; written against 19b668a (the knock-out poisons with a finite pattern in [-5, 5], the kernels' share
clocked on the CPU over an audit batch of its own, the compute census over another, forbidden names refused as
strings). The second forms are in tests/harness/test_audits_second_forms.py; their problems and helpers are reused.

Found at 19b668a and closed since (the same session):
- library compute carried INTO the kernel's call by PyTorch's `__torch_function__` protocol: an argument that
  overrides it (a plain object here), or a `TorchFunctionMode` around the call, answered the candidate's own
  `torch.ops` call with the library's matmul, inside the kernel switch's wrapper (the share read 84-90% as the
  kernel's, the census counted nothing, the knock-out poisoned the library's answer): accepted under STRICT, with
  the static policy on, at 1.76-1.78x. Now refused statically (`__torch_function__`, `TorchFunctionMode`, ...) and,
  with the static policy evaded, seen at run time on every audited call (`[disguised]`).
- two FALSE REJECTIONS of honest kernels as `[ghost-kernel]`: (a) a kernel whose output the library thresholds
  beyond the poison's range (`relu(x) > 6`: the poison was inside [-5, 5]; now its magnitudes run from 0.01 to
  5e4); (b) a kernel that writes its answer into a buffer it is given and returns a count (the poison filled only
  tensors returned: now the arguments too where nothing returned is a tensor).

Not caught (xfail, strict): the poison recognised (a ReLU never returns a negative value; the pattern has them)
and answered wrong on purpose while the library answers every other call: accepted at 1.49-1.54x by default
(share 10-11%), the documented residual (docs/verdicts.md); the share rule bounds it to the library's speed less
the kernel time (1.78x for the library alone), and strict's census rejects it.

Caught: a kernel called on one element per call beside the library's answer (its call overhead alone is 2.3-2.5%
of forward's time, three runs: `[runtime-compute]`). Control: an honest kernel whose output the library reduces
with argmax stays accepted (the poison changes the argmax).

Figures: 2 shared cores, other work running (PSI cpu pressure up to 53%), `EvalPolicy(timing_budget_s=0.2)`;
one run each unless a range is given."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Evaluation, Verdict
from kernelbench.problem import problem_from_source
from tests.conftest import relu_variant
from tests.harness.test_audits_second_forms import MATMUL64, WHERE_RELU, _matmul

pytestmark = pytest.mark.slow
DEFAULT = EvalPolicy(timing_budget_s=0.2)
EVADED = DEFAULT.model_copy(update={"static_policy": "off"})  # as if the static policy had been evaded
STRICT = DEFAULT.model_copy(update={"static_policy": "strict"})


def _caught(problem: object, source: str, why: str) -> None:
    """Refused statically under strict (it names `__torch_function__`/`TorchFunctionMode`, fixed this session),
    and with the static policy evaded, seen at run time: the kernel switch checks every audited call for an
    argument or a mode that answers for the operator (`[disguised]`)."""
    strict = evaluate(problem, source, "cpu", STRICT)
    assert strict.verdict is Verdict.REJECTED and strict.reasons[0].startswith("[forbidden-api]"), _figures(strict)
    evaded = evaluate(problem, source, "cpu", EVADED)
    assert evaded.verdict is Verdict.REJECTED, _figures(evaded)
    assert evaded.reasons[0].startswith("[disguised]") and why in evaded.reasons[0], _figures(evaded)


def _figures(evaluation: Evaluation) -> str:
    return f"{evaluation.verdict} {evaluation.speedup} {evaluation.isolation.get('audits')} {evaluation.reasons}"


def _relu_then(expression: str, name: str) -> object:
    """A problem: the bundled ReLU's input, `expression` of `x` (the reference)."""
    return problem_from_source(f'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return {expression}

def get_inputs():
    return [torch.randn(16, 16384)]

def get_init_inputs():
    return []
''', name, level=1)


# -- library compute inside the kernel's own call ------------------------------------------------------------------

# The kernel switch (harness/compilation/build_cache.py KernelSwitch._wrap) clocks, counts and poisons whatever runs
# inside `function(*args)`. A torch.ops call whose argument overrides `__torch_function__` (a Tensor subclass or any
# object) hands the call to that Python method before the operator runs: here it returns the library's matmul and
# the ReLU kernel never runs. Strict's static reading covers ModelNew's methods, not a helper class.
CARRIER = _matmul(relu_variant(
    "return relu_ext.relu_forward(_Carrier(A, B))  # the kernel's call, answered by the library",
    prelude=(
        "class _Carrier:\n"
        "    def __init__(self, A, B):\n"
        "        self.A, self.B = A, B\n\n"
        "    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return torch.matmul(args[0].A, args[0].B)\n")))

# The same through a TorchFunctionMode around the call (torch.overrides is not refused): the operator's torch
# function handling looks the op up again in its namespace, finds the kernel switch's wrapper, and the mode answers
# for it while the outer wrapper is clocking.
MODE = _matmul(relu_variant(
    "with _Answer(A, B):\n"
    "    return relu_ext.relu_forward(A)",
    prelude=(
        "from torch.overrides import TorchFunctionMode\n\n"
        "class _Answer(TorchFunctionMode):\n"
        "    def __init__(self, A, B):\n"
        "        super().__init__()\n"
        "        self.A, self.B = A, B\n\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        if 'relu_forward' in str(func) + getattr(func, '__name__', ''):\n"
        "            return torch.matmul(self.A, self.B)\n"
        "        return func(*args, **(kwargs or {}))\n")))


def test_under_strict_library_compute_carried_into_the_kernels_call_by_torch_function_is_caught() -> None:
    """No kernel work at all, the library's whole speed: accepted under strict at 1.78x (three runs), kernel_share
    0.84-0.88, knocked_out_right False, no `[runtime-compute]` reason. What should catch it: the wrapper refusing
    arguments that are not plain tensors (or that override `__torch_function__`), and the static policy refusing
    `__torch_function__` definitions."""
    _caught(MATMUL64, CARRIER, "__torch_function__")


def test_under_strict_a_torch_function_mode_answering_the_kernels_call_is_caught() -> None:
    """The second form of the one above, with no argument of a strange type (an argument check in the wrapper would
    not see it; `torch._C._is_torch_function_mode_enabled()` inside the wrapper would, and so would refusing
    `TorchFunctionMode` statically): accepted under strict at 1.76-1.78x, kernel_share 0.88-0.90."""
    _caught(MATMUL64, MODE, "torch-function mode")


# -- the finite poison recognised -----------------------------------------------------------------------------------

DETECT = _matmul(relu_variant(
    "y = torch.matmul(A, B)\n"
    "k = relu_ext.relu_forward(A.expand(2, 256, 256))  # useless work: the clocked share\n"
    "if k.min() < 0:  # a ReLU never returns a negative value: the knock-out's pattern does\n"
    "    return y + 1.0  # wrong on purpose, as if the kernel were on the output path\n"
    "return y"))


def test_a_forward_that_recognises_the_finite_poison_and_answers_wrong_is_caught() -> None:
    """The library's matmul answers; the ReLU kernel does useless work on a 2x expanded input and its output is
    only read to recognise the knock-out (`k.min() < 0`), where forward answers wrong on purpose. Accepted at
    1.49-1.54x while the share was clocked (kernel_share 0.10-0.11, knocked_out_right False); since issue 44 the
    share is counted by work: the library's matmul did 100% of the reference's FLOPs, the kernels 0%, so no
    speedup is credited (measured 2026-11-28: rejected, [runtime-compute], time share 0.11)."""
    evaluation = evaluate(MATMUL64, DETECT, "cpu", DEFAULT)
    assert evaluation.verdict is Verdict.REJECTED, _figures(evaluation)
    assert evaluation.reasons[0].startswith("[runtime-compute]") and "0%" in evaluation.reasons[0], \
        _figures(evaluation)


def test_a_kernel_called_on_one_element_beside_the_library_answer_is_credited_nothing() -> None:
    """Inflating the share without work: the kernel called on one element per call, its output read only to
    recognise the knock-out. The fixed cost of the call (Python, torch.ops, the boxed stable-ABI call, its
    contiguous() and empty_like) is clocked as the kernel's: 2.3-2.5% of a 0.4 ms forward (three runs), under the
    5% line."""
    source = _matmul(relu_variant(
        "y = torch.matmul(A, B)\n"
        "k = relu_ext.relu_forward(A[:1, :1])  # one element: only the call's own cost\n"
        "if k.min() < 0:\n"
        "    return y + 1.0\n"
        "return y"))
    evaluation = evaluate(MATMUL64, source, "cpu", DEFAULT)
    assert evaluation.verdict is Verdict.REJECTED, _figures(evaluation)
    assert evaluation.reasons[0].startswith("[runtime-compute]"), _figures(evaluation)
    assert evaluation.isolation["audits"]["knocked_out_right"] is False
    assert evaluation.isolation["audits"]["kernel_share"] < 0.05


# -- honest kernels and the finite poison ---------------------------------------------------------------------------

def test_an_honest_kernel_whose_output_the_library_thresholds_stays_accepted() -> None:
    """The trials' heavy-tailed and large inputs cross the threshold (with the knock-out off,
    `KERNELWRIGHT_TEST_DEFENCES_OFF=knockout`, it is accepted at 0.98x: not degenerate, no other gate objects), but
    the timed calls, where the knock-out is, draw the problem's own randn inputs: every value the poison writes lies
    under 6, like every ReLU of randn. Rejected `[ghost-kernel]` with the kernel doing 29-50% of forward's time.
    The knock-out's reading "still right" assumes the answer depends on the kernel's values inside [-5, 5]; a
    poison far outside the range of the timed inputs (or two different patterns that must both read right) would
    not mistake a saturating op for a ghost."""
    evaluation = evaluate(_relu_then("torch.relu(x) > 6", "relu_outliers"),
                          relu_variant("return relu_ext.relu_forward(x) > 6"), "cpu", DEFAULT)
    assert evaluation.verdict is Verdict.ACCEPTED, _figures(evaluation)
    assert evaluation.isolation["audits"]["knocked_out_right"] is False


def test_control_an_honest_kernel_whose_output_the_library_reduces_with_argmax_stays_accepted() -> None:
    """The saturating op that the knock-out does read: argmax of the poisoned ReLU is the pattern's own argmax,
    not the input's. Accepted at 0.98-0.99x (the reference is relu and argmax too), kernel_share 0.23-0.24."""
    evaluation = evaluate(_relu_then("torch.argmax(torch.relu(x), dim=1)", "relu_argmax"),
                          relu_variant("return torch.argmax(relu_ext.relu_forward(x), dim=1)"), "cpu", DEFAULT)
    assert evaluation.verdict is Verdict.ACCEPTED, _figures(evaluation)
    assert not any(r.startswith("[ghost-kernel]") for r in evaluation.reasons)
    assert evaluation.isolation["audits"]["knocked_out_right"] is False
    assert evaluation.isolation["audits"]["kernel_share"] > 0.05


# An honest ReLU written into a buffer forward allocates; the operator declares that it writes `out`
# (`Tensor(a!) out`) and returns how many elements it wrote.
RELU_INTO = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>

using torch::stable::Tensor;

int64_t relu_into(Tensor x, Tensor out) {
    STD_TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::headeronly::ScalarType::Float,
                    "expects a float CPU tensor");
    STD_TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && out.numel() == x.numel(), "contiguous, same size");
    const float* src = static_cast<const float*>(x.data_ptr());
    float* dst = static_cast<float*>(out.data_ptr());
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
    }
    return n;
}

STABLE_TORCH_LIBRARY(kw_relu_into_cpu, m) { m.def("relu_into(Tensor x, Tensor(a!) out) -> int"); }
STABLE_TORCH_LIBRARY_IMPL(kw_relu_into_cpu, CPU, m) { m.impl("relu_into", TORCH_BOX(&relu_into)); }
"""

load_inline(
    name="relu_into_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
)
relu_ext = torch.ops.kw_relu_into_cpu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        relu_ext.relu_into(x, out)  # the answer is written into `out`
        return out
'''


def test_an_honest_kernel_that_writes_into_its_output_argument_and_returns_a_count_stays_accepted() -> None:
    """The whole answer is the kernel's (37-73% of forward's time as clocked; the rest is forward's empty_like and
    the call), and nothing else computes it; accepted at 7.7x with the knock-out off. harness/compilation/
    build_cache.py `_poison(result if result is not None else args)`: the knocked-out call still returns the
    kernel's right answer. Poisoning every tensor argument the
    schema marks as written (`Tensor(a!)`), or every tensor argument whenever what is returned is not a tensor,
    would not."""
    evaluation = evaluate(WHERE_RELU, RELU_INTO, "cpu", DEFAULT)
    assert evaluation.verdict is Verdict.ACCEPTED, _figures(evaluation)
    assert evaluation.isolation["audits"]["knocked_out_right"] is False
