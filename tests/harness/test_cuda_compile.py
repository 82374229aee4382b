"""Compile-only CUDA: nvcc with torch's headers, no GPU needed. Runs wherever nvcc is on PATH."""

from __future__ import annotations

import pytest

from harness import EvalPolicy, Verdict, evaluate
from harness.device import resolve_device
from harness.cuda_compile import nvcc_command
from kernelbench.bundled import find_bundled
from tests.conftest import CUDA_CANDIDATES, RELU_CANDIDATE

pytestmark = [pytest.mark.nvcc, pytest.mark.slow]
RELU = find_bundled("relu")

BROKEN = '''
import torch
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void broken_kernel(float* y) { y[threadIdx.x] = undefined_symbol; }
"""
ext = load_inline(name="broken", cpp_sources="", cuda_sources=cuda_source, no_implicit_headers=True)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


def test_cuda_without_gpu_means_compile_only() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert resolve_device("cuda") == "cuda-compile-only"


def test_cuda_kernel_compiles_and_reports_registers() -> None:
    source = (CUDA_CANDIDATES / "level1" / "1_ReLU.py").read_text()
    evaluation = evaluate(RELU, source, "cuda-compile-only", EvalPolicy())
    assert evaluation.verdict is Verdict.COMPILED, evaluation.reasons
    (kernel,) = evaluation.build["builds"][0]["resources"]
    assert kernel["kernel"] == "relu_kernel" and kernel["registers"] > 0 and kernel["spill_store_bytes"] == 0


def test_cuda_compile_error_carries_the_nvcc_message() -> None:
    evaluation = evaluate(RELU, BROKEN, "cuda-compile-only", EvalPolicy())
    assert evaluation.verdict is Verdict.COMPILE_ERROR
    assert "undefined_symbol" in evaluation.reasons[0]


def test_cpu_only_candidate_on_compile_only_device_is_rejected() -> None:
    evaluation = evaluate(RELU, RELU_CANDIDATE.read_text(), "cuda-compile-only", EvalPolicy())
    assert evaluation.verdict is Verdict.REJECTED and "no CUDA sources" in evaluation.reasons[0]


def test_nvcc_command_uses_torch_headers_and_resource_report(tmp_path) -> None:
    command = nvcc_command(tmp_path / "k.cu", tmp_path / "k.cubin", "sm_90", ["-O3"], [])
    assert "-Xptxas" in command and "-v" in command and "-arch=sm_90" in command
    assert any(flag.endswith("torch/include") or "torch/include" in flag for flag in command)
    assert "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE" in command


def test_the_user_is_told_when_cuda_means_compile_only() -> None:
    from harness.device import device_notice

    assert "compile-only" in device_notice("cuda", "cuda-compile-only")
    assert device_notice("cuda", "cuda") is None and device_notice("auto", "cpu") is None
