"""The shape envelope (harness/shipping/envelope.py): the candidate judged at variants of the problem's own sizes.

The variants and the finding are tested without a child process (the reference runs on the meta device); two slow
tests judge real kernels: a ReLU that handles 8 elements at a time and drops the tail (accepted at the bundled
problem's 16 x 16384, wrong at the odd sizes, whose element count leaves 7 over), and the honest bundled ReLU.
"""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from harness.shipping.envelope import (DECLARED, LARGER, ODD, ONE, TILE_8, TILE_32, Envelope, VariantResult,
                                       check_envelope, envelope_finding, own_sizes, parse_shapes, variants)
from kernelbench.bundled import find_bundled
from kernelbench.problem import Problem, ProblemError
from kernelbench.shrink import measure
from tests.conftest import RELU_CANDIDATE, tail_dropping_relu

QUARTERS = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.view(x.shape[0], -1, 4).sum(-1)

batch_size = 16
dim = 1024

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
"""

NO_SIZES = QUARTERS.replace("batch_size = 16\ndim = 1024\n", "").replace("torch.randn(batch_size, dim)",
                                                                            "torch.randn(4, 8)")


def test_relu_variants_are_odd_untiled_and_batched_sizes_within_twice_the_problem() -> None:
    relu = find_bundled("ReLU")
    found = {v.label: v.sizes for v in variants(relu)}
    assert found == {ODD: {"batch_size": 15, "dim": 16273}, TILE_8: {"batch_size": 16, "dim": 16376},
                     TILE_32: {"batch_size": 16, "dim": 16352}, ONE: {"batch_size": 1, "dim": 16384},
                     LARGER: {"batch_size": 31, "dim": 16384}}
    assert 15 * 16273 % 128 == 127  # a kernel that drops the rest of 8, 32 or 128 drops 7, 31 or 127 elements
    own = measure(relu.source)
    for variant in variants(relu):
        assert measure(variant.problem.source).bytes <= 2 * own.bytes
        assert f"batch_size = {variant.sizes['batch_size']}" in variant.problem.source
    assert own_sizes(relu) == {"batch_size": 16, "dim": 16384}


def test_variants_the_reference_cannot_run_are_left_out() -> None:
    """dim must stay a multiple of 4: the odd sizes are not a variant of this problem."""
    problem = Problem(name="quarters", source=QUARTERS)
    labels = [v.label for v in variants(problem)]
    assert ODD not in labels and TILE_8 in labels and LARGER in labels
    assert variants(Problem(name="fixed", source=NO_SIZES)) == []


DATA_DEPENDENT = QUARTERS.replace("return x.view(x.shape[0], -1, 4).sum(-1)",
                                  "return x.view(x.shape[0], -1, 4).sum(-1) * (2.0 if x.sum().item() > 1e9 else 1.0)")


def test_a_reference_the_meta_device_cannot_run_is_run_on_the_cpu() -> None:
    """`.item()` has no value on the meta device: each variant's reference runs on the CPU instead."""
    problem = Problem(name="data_dependent", source=DATA_DEPENDENT)
    assert {v.label: v.sizes for v in variants(problem)} == {v.label: v.sizes for v in variants(
        Problem(name="quarters", source=QUARTERS))}


def test_declared_sizes_must_name_size_constants_the_reference_runs_at() -> None:
    problem = Problem(name="quarters", source=QUARTERS)
    declared = variants(problem, [{"dim": 12}, {"batch_size": 3, "dim": 8}])
    assert [(v.label, v.sizes) for v in declared] == [(DECLARED, {"batch_size": 16, "dim": 12}),
                                                       (DECLARED, {"batch_size": 3, "dim": 8})]
    with pytest.raises(ProblemError, match="width"):
        variants(problem, [{"width": 3}])
    with pytest.raises(ProblemError, match="does not run"):
        variants(problem, [{"dim": 7}])
    with pytest.raises(ProblemError, match="positive"):
        variants(problem, [{"dim": 0}])


def test_shapes_as_a_user_declares_them() -> None:
    assert parse_shapes(["batch_size=1,dim=4097", "dim=12; batch_size=3, dim=8"]) == [
        {"batch_size": 1, "dim": 4097}, {"dim": 12}, {"batch_size": 3, "dim": 8}]
    assert parse_shapes([]) == []
    for wrong in ("dim", "dim=0", "dim=-3", "=4", "dim=4.5"):
        with pytest.raises(ValueError, match="name=positive integer"):
            parse_shapes([wrong])


def test_the_finding_names_the_sizes_where_the_candidate_is_wrong() -> None:
    right = VariantResult(label=TILE_8, sizes={"batch_size": 16, "dim": 16376}, verdict=Verdict.ACCEPTED)
    wrong = VariantResult(label=ODD, sizes={"batch_size": 15, "dim": 16383}, verdict=Verdict.INCORRECT,
                          reason="[correctness] 3 of 245745 elements outside atol")
    assert envelope_finding(Envelope(sizes={"batch_size": 16, "dim": 16384}, variants=[right])) is None
    finding = Envelope(sizes={}, variants=[right, wrong]).finding
    assert finding is not None and finding.check == "envelope" and not finding.fatal and finding.verdict is None
    assert "batch_size=15 dim=16383" in finding.message and "16376" not in finding.message
    assert "1 of 2" in finding.message
    assert Envelope(sizes={}, variants=[right, wrong]).model_dump()["variants"][1]["verdict"] == "incorrect"




@pytest.mark.slow
def test_a_relu_that_drops_the_tail_is_accepted_at_its_shape_and_named_by_the_envelope() -> None:
    relu, source = find_bundled("ReLU"), tail_dropping_relu()
    assert evaluate(relu, source, "cpu", EvalPolicy(skip_timing=True)).verdict is Verdict.ACCEPTED
    envelope = check_envelope(relu, source, "cpu", EvalPolicy(), timed=0)
    verdicts = {v.label: v.verdict for v in envelope.variants}
    assert verdicts[ODD] is Verdict.INCORRECT  # 15 x 16273 elements: 7 left over
    assert verdicts[TILE_8] is verdicts[ONE] is verdicts[LARGER] is Verdict.ACCEPTED  # multiples of 8 elements
    finding = envelope.finding
    assert finding is not None and finding.check == "envelope" and "dim=16273" in finding.message
    assert all(v.speedup is None for v in envelope.variants)


@pytest.mark.slow
def test_the_honest_relu_has_a_clean_envelope_and_a_speedup_at_one_size() -> None:
    relu = find_bundled("ReLU")
    envelope = check_envelope(relu, RELU_CANDIDATE.read_text(), "cpu", EvalPolicy(timing_budget_s=0.2), timed=1)
    assert envelope.finding is None and not envelope.skipped
    assert len(envelope.variants) == 5 and all(v.correct for v in envelope.variants)
    timed = [v for v in envelope.variants if v.speedup is not None]
    assert [v.label for v in timed] == [LARGER] and timed[0].speedup_ci is not None
