"""Every operator is counted by what it computes (kernelbench/op_work.py): a matrix product torch's FLOP counter
has no formula for is not one FLOP per output element (issue 44: `_addmm_activation` passed a 256^3 GEMM as 65536
FLOPs), an operator no rule knows is counted by the most its shapes allow where the candidate's work is counted, and
per element where the reference's is."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

from kernelbench.op_work import op_flops

aten = torch.ops.aten
A, B = torch.randn(64, 32), torch.randn(32, 48)
GEMM = 2.0 * 64 * 32 * 48


def _counted(call: Callable[[], Any], unknown: str = "bound") -> float:
    """The work of every operator `call` dispatches, added up."""
    from torch.utils._python_dispatch import TorchDispatchMode

    total = [0.0]

    class Tally(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            total[0] += op_flops(func, args, kwargs or {}, out, unknown)
            return out

    with Tally():
        call()
    return total[0]


@pytest.mark.parametrize("call", [
    lambda: aten.mm(A, B),
    lambda: getattr(aten, "_addmm_" + "activation")(torch.zeros(48), A, B),
    lambda: aten.addbmm(torch.zeros(64, 48), A[None], B[None]),
    lambda: aten.addmm(torch.zeros(48), A, B),
    lambda: torch.einsum("ij,jk->ik", A, B),
], ids=["mm", "addmm-activation", "addbmm", "addmm", "einsum"])
def test_every_form_of_the_same_product_is_its_full_work(call: Callable[[], Any]) -> None:
    assert _counted(call) == pytest.approx(GEMM, rel=0.01)


def test_matrix_vector_and_outer_products_by_their_sizes() -> None:
    assert _counted(lambda: aten.mv(A, B[:, 0])) == 2.0 * 64 * 32
    assert _counted(lambda: aten.dot(A[0], B[:, 0])) == 2.0 * 32
    assert _counted(lambda: aten.addr(torch.zeros(64, 48), A[:, 0], B[0])) == 2.0 * 64 * 48


def test_an_operator_no_rule_knows_is_counted_by_the_most_its_shapes_allow_for_a_candidate_only() -> None:
    """A real-to-complex FFT has no formula, tag or decomposition: the candidate's count allows it a product of its
    shapes; the reference's does not inflate (one per element)."""
    fft = (lambda: getattr(aten, "_fft" + "_r2c")(A, [1], 0, True))
    assert _counted(fft) >= 2.0 * A.numel() * (64 * 17) ** 0.5  # 2 sqrt(input x input x output)
    assert _counted(fft, unknown="elements") == A.numel()


def test_an_operator_torch_decomposes_is_counted_by_its_decomposition_on_both_sides() -> None:
    """cdist's Euclidean distance decomposes into a GEMM and its norms: its full work for the reference too."""
    distance = (lambda: getattr(aten, "_euclidean" + "_dist")(A.double(), B.t().double()))
    assert _counted(distance) >= GEMM and _counted(distance, unknown="elements") >= GEMM


@pytest.mark.parametrize("call", [
    lambda: torch.relu(A), lambda: torch.cat([A, A]), lambda: torch.softmax(A, -1), lambda: A.sum(1),
    lambda: torch.nn.functional.layer_norm(A, (32,)), lambda: torch.sort(A), lambda: torch.cumsum(A, 1),
], ids=["relu", "cat", "softmax", "sum", "layer-norm", "sort", "cumsum"])
def test_linear_work_stays_one_flop_per_element(call: Callable[[], Any]) -> None:
    """The controls: honest small library steps are not counted as products."""
    assert _counted(call) <= 4 * A.numel()


def test_views_and_allocation_are_free() -> None:
    assert _counted(lambda: (A.view(-1), A.t(), torch.empty(10), A.clone())) == 0.0
