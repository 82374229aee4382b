"""GPU tests: run where a CUDA GPU is visible (`make test-gpu`), skipped elsewhere."""

from __future__ import annotations

import pytest

from harness import EvalPolicy, Verdict, evaluate
from kernelbench.bundled import find_bundled
from tests.conftest import CUDA_CANDIDATES

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
RELU_CUDA = (CUDA_CANDIDATES / "level1" / "1_ReLU.py").read_text()


def test_cuda_kernel_is_accepted_and_timed_with_events() -> None:
    evaluation = evaluate(find_bundled("relu"), RELU_CUDA, "cuda", EvalPolicy())
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert evaluation.device_info["gpu"] and evaluation.speedup > 0
    assert evaluation.build["builds"][0]["resources"][0]["registers"] > 0  # -Xptxas -v on real builds too


def test_wrong_cuda_kernel_is_incorrect() -> None:
    wrong = RELU_CUDA.replace("v > 0.0f ? v : 0.0f", "v > 0.0f ? v : 0.1f * v")
    evaluation = evaluate(find_bundled("relu"), wrong, "cuda", EvalPolicy())
    assert evaluation.verdict is Verdict.INCORRECT


def test_side_stream_work_is_inside_the_timed_interval() -> None:
    """Work queued on another stream must be finished (and counted) before the timer stops."""
    sleeper = RELU_CUDA.replace(
        "relu_kernel<<<blocks, threads>>>(input.data_ptr<float>(), out.data_ptr<float>(), n);",
        "cudaStream_t side; cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);\n"
        "    relu_kernel<<<blocks, threads, 0, side>>>(input.data_ptr<float>(), out.data_ptr<float>(), n);\n"
        "    spin_kernel<<<1, 1, 0, side>>>(20000000);")
    sleeper = sleeper.replace("torch::Tensor relu_forward(torch::Tensor x) {",
                              "__global__ void spin_kernel(long long cycles) { long long s = clock64(); "
                              "while (clock64() - s < cycles) {} }\n\ntorch::Tensor relu_forward(torch::Tensor x) {")
    scanned = evaluate(find_bundled("relu"), sleeper, "cuda", EvalPolicy(timing_budget_s=0.3))
    assert scanned.verdict is Verdict.REJECTED and any("stream" in r.lower() for r in scanned.reasons)
    # with the static scan off, the runtime must still see the side stream's work: timed in full, or rejected
    evaluation = evaluate(find_bundled("relu"), sleeper, "cuda", EvalPolicy(timing_budget_s=0.3, static_policy="off"))
    if evaluation.verdict is Verdict.ACCEPTED:
        assert evaluation.candidate_ms > 5.0, evaluation.candidate_ms  # 20M cycles ~ 10 ms at 2 GHz
    else:
        assert evaluation.verdict is Verdict.REJECTED and any("stream" in r.lower() for r in evaluation.reasons), \
            evaluation.reasons


def test_nvml_telemetry_is_recorded_with_the_timing() -> None:
    evaluation = evaluate(find_bundled("relu"), RELU_CUDA, "cuda", EvalPolicy(timing_budget_s=0.3))
    nvml = evaluation.device_info["nvml"]
    assert nvml["before"].get("sm_clock_mhz") or "error" in nvml["before"]  # filled, or says why (no nvidia-ml-py)
    assert evaluation.roofline["floor_ms"] > 0 and "candidate_fraction" in evaluation.roofline


def test_ncu_profiles_the_candidates_own_kernel() -> None:
    from harness.execution.profile import profile_candidate

    result = profile_candidate(find_bundled("relu"), RELU_CUDA, ["relu_kernel"], EvalPolicy())
    if "error" in result:
        pytest.skip(f"profiling unavailable here: {result['error']}")
    assert {r["kernel"] for r in result["ncu"]} == {"relu_kernel"}
    assert result["ncu"][0]["dram_pct"] > 0
