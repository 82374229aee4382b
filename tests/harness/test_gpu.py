"""GPU tests: run where a CUDA GPU is visible (`make test-gpu`), skipped elsewhere."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
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


def test_side_stream_work_spread_over_calls_is_timed() -> None:
    """Second form, from Python: a fresh torch stream per call with a spin (torch's own `_sleep` kernel), so side
    work of successive calls could overlap if calls were not each finished before the next (measured on an H100
    before the per-call device sync: accepted at 0.88 ms per call for 10 ms of work per call)."""
    spin = f"torch.cuda._sleep({10_000_000 + 1})"  # a name and count the static scan never sees spelled out
    sleeper = RELU_CUDA.replace(
        "        return relu_ext.relu_forward(x)",
        "        side = torch.cuda.Stream()\n"
        "        with torch.cuda.stream(side):\n"
        f"            {spin}\n"
        "        return relu_ext.relu_forward(x)")
    assert sleeper != RELU_CUDA
    evaluation = evaluate(find_bundled("relu"), sleeper, "cuda", EvalPolicy(timing_budget_s=0.3, static_policy="off"))
    if evaluation.verdict is Verdict.ACCEPTED:
        assert evaluation.candidate_ms > 2.5, (evaluation.candidate_ms, evaluation.reasons)  # ~5 ms at 2 GHz
    else:
        assert evaluation.verdict is Verdict.REJECTED, evaluation.reasons


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


def test_the_knock_out_and_the_census_are_timed_calls_on_cuda_too() -> None:
    """Issue 31 on the child-staged protocol CUDA uses: the knock-out travels in a staged batch's `go` and the
    census batch runs under the dispatch mode there. The honest kernel is on the output path of every knocked-out
    call; a kernel on the path only for its first 12 calls (the library's relu after) is a ghost."""
    honest = evaluate(find_bundled("relu"), RELU_CUDA, "cuda", EvalPolicy())
    assert honest.verdict is Verdict.ACCEPTED, honest.reasons
    assert honest.isolation["audits"]["knockouts"] >= 1 and honest.isolation["audits"]["knocked_out_right"] is False
    ghost = RELU_CUDA.replace(
        "        return relu_ext.relu_forward(x)",
        "        self.calls = getattr(self, 'calls', 0) + 1\n"
        "        if self.calls <= 12:\n"
        "            return relu_ext.relu_forward(x)\n"
        "        relu_ext.relu_forward(x[:4])\n"
        "        return torch.relu(x)")
    evaluation = evaluate(find_bundled("relu"), ghost, "cuda", EvalPolicy())
    assert evaluation.verdict is Verdict.REJECTED and evaluation.reasons[0].startswith("[ghost-kernel]"), \
        evaluation.reasons
