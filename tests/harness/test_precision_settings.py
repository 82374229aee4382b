"""A candidate that changes its process's precision settings (TF32 for convolutions, the float32 matmul precision) is
caught as it changes any global: the child reads the settings before the import, once loaded and after its checked
and timed calls, and the parent rejects a change (the static policy only notes these under `default`). The honest
bundled ReLU beside them stays accepted, with both sides' settings recorded equal."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check
from kernelbench.bundled import find_bundled
from tests.conftest import RELU_CANDIDATE, relu_variant

pytestmark = pytest.mark.slow
QUICK = EvalPolicy(timing_budget_s=0.1, envelope=False, process_pairs=1)


@pytest.mark.proves(Check.PRECISION_SETTINGS)
def test_a_setting_changed_at_import_is_rejected() -> None:
    source = relu_variant("return relu_ext.relu_forward(x)",
                          prelude="torch.backends.cudnn.allow_tf32 = not torch.backends.cudnn.allow_tf32\n")
    evaluation = evaluate(find_bundled("relu"), source, "cpu", QUICK)
    assert evaluation.verdict.value == "rejected", evaluation.reasons
    assert evaluation.reasons[0].startswith("[precision-settings] the candidate changed its process's precision")
    assert "cudnn.allow_tf32" in evaluation.reasons[0]


@pytest.mark.proves(Check.PRECISION_SETTINGS)
def test_a_setting_changed_inside_forward_is_rejected() -> None:
    """The second way: a call, made by forward, at the first checked call rather than at import."""
    source = relu_variant('torch.set_float32_matmul_precision("medium")\nreturn relu_ext.relu_forward(x)')
    evaluation = evaluate(find_bundled("relu"), source, "cpu", QUICK)
    assert evaluation.verdict.value == "rejected", evaluation.reasons
    assert evaluation.reasons[0].startswith("[precision-settings]")
    assert "float32_matmul_precision highest -> medium" in evaluation.reasons[0]


def test_the_honest_relu_stays_accepted_with_equal_settings_recorded() -> None:
    evaluation = evaluate(find_bundled("relu"), RELU_CANDIDATE.read_text(), "cpu", QUICK)
    assert evaluation.accepted, evaluation.reasons
    recorded = evaluation.isolation["precision_settings"]
    assert recorded["reference"] and set(recorded["candidate"]) >= {"start", "loaded", "after_correctness"}
    assert all(settings == recorded["reference"] for settings in recorded["candidate"].values())
