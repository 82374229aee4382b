import torch

from harness.policy import EvalPolicy
from harness.verification.compare import compare_trial

POLICY = EvalPolicy()


def test_exact_and_within_tolerance_pass() -> None:
    ref = torch.randn(64, 64)
    assert compare_trial(1, ref, ref.clone(), POLICY).passed
    assert compare_trial(1, ref, ref + 1e-6, POLICY).passed


def test_fp32_error_above_1e4_fails_with_location() -> None:
    ref = torch.zeros(8, 8)
    got = ref.clone()
    got[3, 5] = 5e-4
    result = compare_trial(7, ref, got, POLICY)
    assert not result.passed and "(3, 5)" in result.message and result.seed == 7


def test_half_precision_uses_1e2() -> None:
    ref = torch.ones(16, dtype=torch.float16)
    assert compare_trial(1, ref, ref + 0.004, POLICY).passed
    assert not compare_trial(1, ref, ref + 0.05, POLICY).passed


def test_nan_never_passes_even_against_nan() -> None:
    ref = torch.randn(10)
    got = ref.clone()
    got[0] = float("nan")
    assert "NaN" in compare_trial(1, ref, got, POLICY).message
    assert not compare_trial(1, got, got.clone(), POLICY).passed


def test_shape_dtype_and_type_mismatches() -> None:
    ref = torch.randn(4, 4)
    assert "shape" in compare_trial(1, ref, ref.reshape(16), POLICY).message
    assert "dtype" in compare_trial(1, ref, ref.double(), POLICY).message
    assert "expected a torch.Tensor" in compare_trial(1, ref, {"__unsupported_output_type__": "str"}, POLICY).message
    assert "2 outputs" in compare_trial(1, ref, [ref, ref], POLICY).message


def test_small_outputs_need_relative_accuracy_not_just_atol() -> None:
    ref = torch.full((1000,), 1e-5)
    got = torch.zeros(1000)  # inside atol=1e-4 everywhere, but 100% wrong
    result = compare_trial(1, ref, got, POLICY)
    assert not result.passed and "relative error" in result.message


def test_tuple_outputs_are_compared_elementwise() -> None:
    a, b = torch.randn(3), torch.randn(5)
    assert compare_trial(1, (a, b), [a.clone(), b.clone()], POLICY).passed
    assert "output 1" in compare_trial(1, (a, b), [a, b + 1], POLICY).message


def test_one_infinity_in_the_reference_does_not_make_every_finite_value_pass() -> None:
    """The absolute tolerance is in units of the output's rms: an inf in the reference made it infinite, and
    [100, -5, inf] passed for [1, 2, inf]."""
    ref = torch.tensor([1.0, 2.0, float("inf")])
    assert compare_trial(1, ref, ref.clone(), POLICY).passed
    assert not compare_trial(1, ref, torch.tensor([100.0, -5.0, float("inf")]), POLICY).passed
    assert not compare_trial(1, ref, torch.tensor([1.0, 2.0, 5.0]), POLICY).passed
    assert not compare_trial(1, ref, torch.tensor([1.0, 2.0, -float("inf")]), POLICY).passed


def test_infinities_compare_by_position_and_sign() -> None:
    ref = torch.tensor([float("-inf"), 1.0, 2.0, float("inf")])
    assert compare_trial(1, ref, ref.clone(), POLICY).passed
    flipped = ref.clone()
    flipped[0] = float("inf")
    assert "non-finite" in compare_trial(1, ref, flipped, POLICY).message
    finite = ref.clone()
    finite[0] = -1e30
    assert not compare_trial(1, ref, finite, POLICY).passed
    overflow = torch.tensor([1.0, 2.0])
    assert not compare_trial(1, overflow, torch.tensor([1.0, float("inf")]), POLICY).passed
