"""The numerical contract (harness/verification/oracle.py): errors against a float64 run of the reference, the
`[oracle]` verdict for a candidate less accurate than the reference by more than its dtype's factor yet inside
today's tolerance, and bitwise
determinism. No child process: synthetic tensors, and one real problem's reference run in the parent."""

from __future__ import annotations

import pytest
import torch

from harness.policy import EvalPolicy
from harness.shipping.precision import at_precision
from harness.verification.compare import compare_trial
from harness.records import Verdict
from harness.verification.oracle import (OracleError, allowed_error, bitwise_deterministic, contract_finding,
                                         deterministic, error_against, fp64_oracle, numerical_contract, skipped_note)
from harness.verification.reference import run_reference
from kernelbench.bundled import find_bundled
from kernelbench.problem import Problem
from kernelbench.shrink import rewrite_constants


def test_error_against_the_oracle_is_max_abs_and_norm_wise_relative() -> None:
    exact = torch.tensor([1.0, -2.0, 2.0], dtype=torch.float64)
    got = torch.tensor([1.0, -2.0, 2.5])
    error = error_against([got], [exact])
    assert error is not None
    assert error.max_abs == 0.5 and abs(error.relative - 0.5 / 3.0) < 1e-12
    assert error.eps == torch.finfo(torch.float32).eps


def test_error_is_the_worst_over_trials_and_outputs_and_skips_non_finite_oracle_positions() -> None:
    exact = [[torch.ones(4, dtype=torch.float64), torch.tensor([float("inf"), 1.0], dtype=torch.float64)],
             [torch.ones(4, dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64)]]
    got = [[torch.ones(4), torch.tensor([float("inf"), 1.0])],
           [torch.ones(4).half(), torch.tensor([1.0, 1.25])]]
    error = error_against(got, exact)
    assert error is not None and error.max_abs == 0.25
    assert error.eps == torch.finfo(torch.float16).eps  # the least precise output compared
    assert error_against([torch.ones(3)], [torch.ones(4, dtype=torch.float64)]) is None  # nothing comparable
    assert error_against([torch.ones(3)], []) is None


def test_contract_refuses_a_candidate_less_accurate_than_the_reference_by_more_than_its_factor() -> None:
    """float32: 8x the larger of the reference's error and 64 epsilons (7.6e-6): 6.1e-5 here."""
    reference = OracleError(max_abs=1e-6, relative=1e-7, eps=1.2e-7)
    within = OracleError(max_abs=1e-5, relative=5e-5, eps=1.2e-7)
    sloppy = OracleError(max_abs=1e-3, relative=8e-5, eps=1.2e-7)
    assert contract_finding(within, reference) is None
    finding = contract_finding(sloppy, reference)
    assert finding is not None and finding.check == "oracle" and finding.verdict is Verdict.INCORRECT
    assert "8e-05" in finding.message and "1e-07" in finding.message  # both errors named
    assert contract_finding(sloppy, reference, multiple=1000) is None
    assert contract_finding(None, reference) is None and contract_finding(sloppy, None) is None


def test_half_precision_has_its_own_factor_and_a_floor_for_small_outputs() -> None:
    """float16: 2x over a quarter epsilon; an output of one element may be one ulp off (an honest reordering that
    rounds to the other neighbour)."""
    eps = float(torch.finfo(torch.float16).eps)
    reference = OracleError(max_abs=1e-3, relative=2e-4, eps=eps, dtype="float16")
    assert contract_finding(OracleError(max_abs=1e-3, relative=2.4e-4, eps=eps, dtype="float16"), reference) is None
    refused = contract_finding(OracleError(max_abs=1e-2, relative=1e-3, eps=eps, dtype="float16"), reference)
    assert refused is not None and refused.verdict is Verdict.INCORRECT and "float16" in refused.message
    one_ulp = OracleError(max_abs=eps, relative=eps, eps=eps, dtype="float16", count=1)
    assert contract_finding(one_ulp, reference.model_copy(update={"count": 1})) is None
    assert allowed_error(0.0, "float16") == pytest.approx(2 * 0.25 * eps)


def test_an_exact_reference_does_not_refuse_every_rounding() -> None:
    """ReLU's reference is exact (error 0): 64 epsilons of the output's dtype are the floor, not zero."""
    exact = OracleError(max_abs=0.0, relative=0.0, eps=1.2e-7)
    assert contract_finding(OracleError(max_abs=1e-7, relative=1e-6, eps=1.2e-7), exact) is None
    assert contract_finding(OracleError(max_abs=1e-4, relative=7e-5, eps=1.2e-7), exact) is not None


def test_bitwise_determinism_compares_bits() -> None:
    a = torch.tensor([1.0, float("nan"), -0.0])
    assert bitwise_deterministic([a, torch.arange(3)], [a.clone(), torch.arange(3)])
    assert not bitwise_deterministic(a, torch.tensor([1.0, float("nan"), 0.0]))  # -0.0 and 0.0 differ in bits
    assert not bitwise_deterministic(a, a.double())
    assert not bitwise_deterministic(a, a.reshape(1, 3))
    assert not bitwise_deterministic([a], [a, a])
    assert not bitwise_deterministic(a, [a])
    assert bitwise_deterministic(torch.tensor([True, False]), torch.tensor([True, False]))
    assert not bitwise_deterministic(torch.tensor(1.0), torch.tensor(1.0 + 2**-20))


def test_determinism_of_the_trial_called_twice() -> None:
    one, other = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 2**-20])
    assert deterministic([[one], [one, one.clone()], [other]]) is True
    assert deterministic([[one], [one, other]]) is False
    assert deterministic([[one], [other]]) is None  # no trial was called twice


CASTS_INSIDE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return (x * 2).float()

def get_inputs():
    return [torch.randn(8)]

def get_init_inputs():
    return []
"""

SINGLE_ONLY = CASTS_INSIDE.replace("return (x * 2).float()", "return torch.mm(x.view(1, 8), torch.eye(8))")


def test_a_reference_that_cannot_give_double_is_skipped_with_its_reason() -> None:
    reference = run_reference(Problem(name="casts", source=CASTS_INSIDE), "cpu", 1, [2])
    oracle = fp64_oracle(reference)
    assert oracle.outputs is None and "float32" in (oracle.skipped or "")
    contract = numerical_contract(reference, reference.outputs)
    assert contract.candidate is None and contract.finding() is None
    note = skipped_note(contract)
    assert note is not None and note.check == "oracle" and not note.fatal
    raises = fp64_oracle(run_reference(Problem(name="single", source=SINGLE_ONLY), "cpu", 1, [2]))
    assert raises.outputs is None and "cannot run in float64" in (raises.skipped or "")


def _sum_problem() -> Problem:
    """The bundled sum reduction with a longer reduced dimension (4096), where the order of a float32 sum shows."""
    problem = find_bundled("Sum_reduction_over_a_dimension")
    source = rewrite_constants(problem.source, {"batch_size": 2, "dim1": 4096, "dim2": 64})
    return Problem(name=problem.name, source=source, level=problem.level, problem_id=problem.problem_id)


def _sloppy_sum(x: torch.Tensor) -> torch.Tensor:
    """float32 sums of the positive and the negative terms, one after the other, then their difference: inside
    the tolerance, a hundred times the reference's error."""
    positive, negative = torch.zeros(x.shape[0], 1, x.shape[2]), torch.zeros(x.shape[0], 1, x.shape[2])
    for i in range(x.shape[1]):
        term = x[:, i:i + 1]
        positive += term.clamp(min=0)
        negative += term.clamp(max=0)
    return positive + negative


def test_a_sloppy_float32_sum_passes_and_a_skipped_term_inside_the_tolerance_is_refused() -> None:
    """Sums of the positive and the negative terms apart: over 100x the reference's error, yet under float32's
    floor (honest sequential float32 sums reach 9e-6 at 262144 terms, benchmarks/oracle_factor.py): passes. An
    approximation off by 9e-5 of the output is inside the tolerance (1e-4) and refused."""
    reference = run_reference(_sum_problem(), "cpu", 3, [11, 12])
    sloppy = [_sloppy_sum(inputs[0]) for inputs in reference.trial_inputs]
    assert all(compare_trial(0, ref, got, EvalPolicy()).passed for ref, got in zip(reference.outputs, sloppy))
    contract = numerical_contract(reference, sloppy)
    assert contract.skipped is None and contract.candidate and contract.reference
    assert contract.candidate.relative > 100 * contract.reference.relative
    assert contract.finding() is None
    short = [out + 9e-5 * out.pow(2).mean().sqrt() for out in reference.outputs]  # a bias of 9e-5 of the output
    assert all(compare_trial(0, ref, got, EvalPolicy()).passed for ref, got in zip(reference.outputs, short))
    finding = numerical_contract(reference, short).finding()
    assert finding is not None and finding.check == "oracle" and finding.verdict is Verdict.INCORRECT
    honest = numerical_contract(reference, [inputs[0].sum(1, keepdim=True) for inputs in reference.trial_inputs])
    assert honest.finding() is None
    assert bitwise_deterministic(sloppy, [_sloppy_sum(inputs[0]) for inputs in reference.trial_inputs])


def test_a_problem_at_half_precision_casts_parameters_and_inputs_and_keeps_its_oracle() -> None:
    gemm = find_bundled("Gemm_BiasAdd_ReLU")
    assert at_precision(gemm, "fp32") is gemm
    half = at_precision(gemm, "fp16")
    assert half.name == "Gemm_BiasAdd_ReLU_fp16" and half.fingerprint != gemm.fingerprint
    reference = run_reference(half, "cpu", 1, [2])
    assert reference.trial_inputs[0][0].dtype == torch.float16 and reference.outputs[0].dtype == torch.float16
    assert all(p.dtype == torch.float16 for p in reference.model.parameters())
    contract = numerical_contract(reference, reference.outputs)
    assert contract.reference is not None and contract.reference.eps == torch.finfo(torch.float16).eps
    assert contract.reference.relative > 1e-5  # a float16 reference has an error of its own against float64
    assert run_reference(at_precision(find_bundled("ReLU"), "bf16"), "cpu", 1, [2]).outputs[0].dtype == torch.bfloat16
    with pytest.raises(ValueError, match="fp8"):
        at_precision(gemm, "fp8")  # type: ignore[arg-type]


IN_PLACE = CASTS_INSIDE.replace("return (x * 2).float()", "return x.mul_(2)").replace("torch.randn(8)",
                                                                                     "torch.randn(8).double()")


def test_the_oracle_never_writes_into_the_trial_inputs() -> None:
    reference = run_reference(Problem(name="in_place", source=IN_PLACE), "cpu", 1, [2])
    before = reference.trial_inputs[0][0].clone()
    oracle = fp64_oracle(reference)
    assert oracle.outputs is not None and torch.equal(reference.trial_inputs[0][0], before)
