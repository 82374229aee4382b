"""Fair baselines: every baseline process runs with the precision settings the reference was computed with (TF32,
reduced-precision reductions, the float32 matmul precision), says them once loaded, and one that differs is refused
with the difference as its reason. CUDA Agent's published speedups were inflated by exactly such a baseline."""

from __future__ import annotations

import pytest

from harness.policy import EvalPolicy
from harness.execution.baseline import _unequal_settings, time_references
from harness.isolation.protocol import Status
from harness.values.precision import precision_settings
from kernelbench.bundled import find_bundled
from kernelbench.problem import Problem

QUICK = EvalPolicy(timing_budget_s=0.2, process_pairs=1, noise_floor=False)

# Loaded in the child as `kernelwright_problem` (the parent loads it under another name): only the baseline's
# processes compute without TF32 convolutions and at medium float32 matmul precision.
OTHER_SETTINGS = '''

if __name__ == "kernelwright_problem":
    torch.backends.cudnn.allow_tf32 = not torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("medium")
'''


@pytest.mark.slow
def test_a_baseline_process_with_other_precision_settings_is_refused_with_a_reason() -> None:
    relu = find_bundled("relu")
    problem = Problem(name="relu_other_settings", source=relu.source.rstrip() + "\n" + OTHER_SETTINGS)
    paired = time_references(problem, "cpu", QUICK, compiled=False)
    assert paired.reading is None and paired.error is not None
    assert paired.error.startswith("[precision] the second eager baseline refused")
    assert "float32_matmul_precision highest -> medium" in paired.error and "cudnn.allow_tf32" in paired.error


@pytest.mark.slow
def test_the_honest_baseline_runs_with_the_reference_settings_and_records_them() -> None:
    paired = time_references(find_bundled("relu"), "cpu", QUICK, compiled=False)
    assert paired.error is None and paired.reading is not None
    assert paired.settings == precision_settings()


def test_a_compiled_baseline_that_reports_other_settings_or_none_is_refused() -> None:
    expected = precision_settings()
    tf32 = {**expected, "cuda.matmul.allow_tf32": "True" if expected["cuda.matmul.allow_tf32"] != "True" else "False"}
    refused = _unequal_settings([Status.read({"status": "ok", "settings": expected}),
                                 Status.read({"status": "ok", "settings": tf32})], expected, True, "max-autotune")
    assert refused is not None and refused.startswith("[precision] torch.compile (max-autotune) baseline refused")
    assert "cuda.matmul.allow_tf32" in refused
    assert "not reported" in (_unequal_settings([Status.read({"status": "ok"})], expected, True, None) or "")
    assert _unequal_settings([Status.read({"status": "ok", "settings": dict(expected)})], expected, True, None) is None
