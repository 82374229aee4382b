"""Canaries and input distributions: trivial outputs must fail, and where a problem's own inputs let one pass,
the varied distributions harden it or the harness says the problem is degenerate."""

from __future__ import annotations

import pytest
import torch

from harness.policy import EvalPolicy
from harness.values.distributions import apply_distribution
from harness.verification.canaries import passing_canaries
from harness.verification.reference import run_reference
from harness.records import Check
from kernelbench.bundled import bundled_problems
from kernelbench.problem import problem_from_source
from kernelwright.problem_service import check_problems

TEMPLATE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return {body}

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return []
"""


def _problem(body: str, inputs: str):
    return problem_from_source(TEMPLATE.format(body=body, inputs=inputs), "P")


def test_identity_passes_relu_on_non_negative_inputs_until_hardened() -> None:
    relu_on_rand = _problem("torch.relu(x)", "torch.rand(64, 64)")  # KernelBench's own weakness
    own = run_reference(relu_on_rand, "cpu", 0, [1, 2, 3, 4], vary_distributions=False)
    hardened = run_reference(relu_on_rand, "cpu", 0, [1, 2, 3, 4], vary_distributions=True)
    assert "passthrough" in passing_canaries(own, EvalPolicy())
    assert "passthrough" not in passing_canaries(hardened, EvalPolicy())
    assert hardened.distributions[1] == "signed_uniform"


def test_domain_is_kept_where_the_reference_needs_it() -> None:
    log = _problem("torch.log(x)", "torch.rand(64, 64) + 0.1")
    run = run_reference(log, "cpu", 0, [1, 2, 3, 4])
    assert run.distributions == ["default", "uniform", "heavy_tailed", "spiky"]  # no signed inputs for log
    assert all(bool(torch.isfinite(o).all()) for o in run.outputs)


def test_tiny_outputs_are_not_degenerate_thanks_to_the_relative_error_check() -> None:
    rows = check_problems([_problem("x * 1e-7", "torch.randn(64, 64)")], "cpu", shrink=False)
    assert rows[0]["status"] == "ok"  # zeros are within atol everywhere, but 100% off relative to the output


def test_output_insensitive_to_inputs_is_reported_degenerate() -> None:
    softmax_of_one = _problem("torch.softmax(x, dim=1)", "torch.randn(64, 1)")  # always exactly 1.0
    rows = check_problems([softmax_of_one], "cpu", shrink=False)
    assert rows[0]["status"] == "degenerate" and "ones" in rows[0]["passes_after_hardening"]


def test_bundled_problems_have_no_passing_canary() -> None:
    rows = check_problems(bundled_problems(), "cpu", shrink=False)
    assert {r["status"] for r in rows} == {"ok"}, rows


def test_distributions_keep_shape_dtype_and_integers() -> None:
    inputs = [torch.randn(8, 8), torch.randint(0, 5, (8,)), 3, torch.rand(4).half()]
    for name in ("uniform", "heavy_tailed", "spiky"):
        out = apply_distribution(inputs, name, seed=7)
        assert out[0].shape == (8, 8) and out[0].dtype == torch.float32 and not torch.equal(out[0], inputs[0])
        assert out[1] is inputs[1] and out[2] == 3 and out[3].dtype == torch.float16
        assert bool((out[3] >= 0).all())  # non-negative inputs stay non-negative unless asked otherwise


def test_a_large_magnitude_trial_breaks_a_softmax_without_max_subtraction() -> None:
    """Trial 5 draws the problem's own sample times 100: exp() of logits near +100 overflows in fp32."""
    import torch

    from harness.verification.reference import run_reference
    from kernelbench.bundled import find_bundled

    run = run_reference(find_bundled("softmax"), "cpu", 1, [11, 12, 13, 14, 15])
    assert run.distributions[4] == "large"
    logits = run.trial_inputs[4][0]
    assert float(logits.abs().max()) > 50
    naive = torch.exp(logits) / torch.exp(logits).sum(dim=1, keepdim=True)
    assert not torch.isfinite(naive).all() and torch.isfinite(run.outputs[4]).all()


def test_a_correct_candidate_on_a_degenerate_problem_gets_no_speedup() -> None:
    """The canaries are checked on a thread while the candidate runs: the verdict still waits for them, and a
    degenerate problem is never timed."""
    from harness.pipeline import evaluate
    from harness.records import Verdict

    softmax_of_one = _problem("torch.softmax(x, dim=1)", "torch.randn(64, 1)")
    candidate = softmax_of_one.source.replace("class Model(", "class ModelNew(")
    policy = EvalPolicy(require_custom_kernel=False, static_policy="off", timing_budget_s=0.05)
    evaluation = evaluate(softmax_of_one, candidate, "cpu", policy)
    assert evaluation.verdict is Verdict.DEGENERATE, evaluation.reasons
    assert evaluation.speedup is None and "timing" not in evaluation.phase_seconds


BRANCH_UNDER_TOLERANCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(x) + 1e-7 * self.conv(x)  # the expensive branch contributes under the tolerance

def get_inputs():
    return [torch.randn(2, 4, 16, 16)]

def get_init_inputs():
    return []
"""


def test_a_term_under_the_tolerance_makes_the_problem_degenerate_for_it() -> None:
    """A kernel that skips the conv is correct at these parameters: the problem is reported degenerate for that
    term (no speedup), while the term that counts is not."""
    problem = problem_from_source(BRANCH_UNDER_TOLERANCE, "branch")
    passing = passing_canaries(run_reference(problem, "cpu", 0, [1, 2, 3, 4, 5]), EvalPolicy())
    assert passing == ["the reference without `mul = 1e-07 * conv`"], passing
    counted = problem_from_source(BRANCH_UNDER_TOLERANCE.replace("1e-7", "0.5"), "branch_counted")
    assert passing_canaries(run_reference(counted, "cpu", 0, [1, 2, 3, 4, 5]), EvalPolicy()) == []


SMALL_TERMS = {
    # a term below the tolerance in forms the `+` canaries never matched, behind an `if` fx cannot trace
    "addcmul": "torch.addcmul(torch.relu(x), self.conv(x), x, value=1e-9)",
    "factor": "torch.relu(x) * (1 + 1e-9 * torch.tanh(self.conv(x)))",
}


def _small_term_problem(expression: str) -> object:
    from kernelbench.problem import problem_from_source

    return problem_from_source(f'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        if x.dim() != 4:
            raise ValueError("expects a 4-d input")
        return {expression}

def get_inputs():
    return [torch.randn(2, 4, 16, 16)]

def get_init_inputs():
    return []
''', "small_term")


@pytest.mark.parametrize("form", sorted(SMALL_TERMS))
def test_a_part_below_the_tolerance_in_any_form_makes_the_problem_degenerate(form: str) -> None:
    reference = run_reference(_small_term_problem(SMALL_TERMS[form]), "cpu", 0, [1, 2, 3, 4, 5])
    passing = passing_canaries(reference, EvalPolicy())
    assert any("conv2d" in p for p in passing), passing


def test_every_part_of_the_bundled_problems_matters() -> None:
    """The honest control: no bundled problem is degenerate for any part (their candidates keep their verdicts)."""
    from harness.verification.ablation import degenerate_parts
    from kernelbench.bundled import bundled_problems

    for problem in bundled_problems():
        report = degenerate_parts(run_reference(problem, "cpu", 0, [1, 2, 3, 4, 5]), EvalPolicy())
        assert report.degenerate == [] and report.note is None and report.checked == report.total, (problem.name,
                                                                                                     report)


# The attacks the canaries stop (issue 36): a candidate that passes every trial with a trivial answer, or skips a
# part of the reference that does not matter at the problem's own parameters, is credited nothing. Both are plain
# PyTorch (no build); tests/harness/test_defences_load_bearing.py runs them with each check switched off.
ATTACK_POLICY = EvalPolicy(require_custom_kernel=False, static_policy="off", timing_budget_s=0.05)


@pytest.mark.proves(Check.DEGENERATE_PROBLEM)
def test_a_trivial_answer_to_a_degenerate_problem_is_credited_nothing() -> None:
    """ones_like instead of a softmax over one column: right on every trial. Defence off (`trivial_canaries`):
    accepted at 9.5x and 15.9x (measured, two budgets), with no reason but the note that it has no custom
    kernel."""
    from harness.pipeline import evaluate
    from harness.records import Verdict

    softmax_of_one = _problem("torch.softmax(x, dim=1)", "torch.randn(262144, 1)")
    candidate = softmax_of_one.source.replace("class Model(", "class ModelNew(").replace(
        "return torch.softmax(x, dim=1)", "return torch.ones_like(x)")
    evaluation = evaluate(softmax_of_one, candidate, "cpu", ATTACK_POLICY)
    assert evaluation.verdict is Verdict.DEGENERATE, evaluation.reasons
    assert evaluation.reasons[0].startswith("[degenerate-problem]") and "ones" in evaluation.reasons[0]
    assert evaluation.speedup is None


@pytest.mark.proves(Check.ABLATION)
def test_a_candidate_that_skips_a_term_under_the_tolerance_is_credited_nothing() -> None:
    """relu(x) without the `1e-7 * conv(x)` the reference adds: within tolerance on every trial. Defence off
    (`term_ablation`: the term canaries and the ablation check): accepted at 2.5-2.8x (measured), with no
    reason but the note that it has no custom kernel."""
    from harness.pipeline import evaluate
    from harness.records import Verdict

    problem = problem_from_source(BRANCH_UNDER_TOLERANCE, "branch")
    candidate = BRANCH_UNDER_TOLERANCE.replace("class Model(", "class ModelNew(").replace(
        "return torch.relu(x) + 1e-7 * self.conv(x)", "return torch.relu(x)")
    evaluation = evaluate(problem, candidate, "cpu", ATTACK_POLICY)
    assert evaluation.verdict is Verdict.DEGENERATE, evaluation.reasons
    assert evaluation.reasons[0].startswith("[degenerate-problem]") and "conv" in evaluation.reasons[0]
    assert evaluation.speedup is None
