"""Compile-only CUDA: nvcc with torch's headers, no GPU needed. Runs wherever nvcc is on PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from harness.compilation.build_service import BuildService
from harness.compilation.cuda_compile import SCRIPT, plan_compile_only
from harness.compilation.pch import PrecompiledHeaders
from harness.device import resolve_device
from harness.isolation.sandbox import Limits
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

BROKEN_HOST = '''
import torch
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="broken_host", cpp_sources='static_assert(false, "broken host binding");',
                  cuda_sources="__global__ void fine_kernel(float* y) { y[threadIdx.x] = 1.0f; }", no_implicit_headers=True)

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


def torch_std(folder: Path) -> str:
    """The C++ standard this torch's own build.ninja asks for (torch 2.13: c++20; 2.11: c++17)."""
    import re

    from harness.compilation.native_build import torch_ninja

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "probe.cpp").write_text("int probe() { return 0; }\n")
    return re.search(r"-std=c\+\+\d+", torch_ninja(folder, "probe", [str(folder / "probe.cpp")], {}, None,
                                                    with_cuda=False)).group(0)


def test_cpu_only_candidate_on_compile_only_device_is_rejected() -> None:
    evaluation = evaluate(RELU, RELU_CANDIDATE.read_text(), "cuda-compile-only", EvalPolicy())
    assert evaluation.verdict is Verdict.REJECTED and "no CUDA sources" in evaluation.reasons[0]


def test_compile_only_uses_torch_flags_for_both_compilers(tmp_path: Path) -> None:
    arguments = {"cpp_sources": "torch::Tensor f(torch::Tensor x);", "cuda_sources": "__global__ void k() {}",
                 "functions": ["f"], "extra_cflags": ["-DHOST_ONLY_FLAG"], "extra_cuda_cflags": ["-O3"]}
    plan = plan_compile_only(tmp_path, "inline", "ext", arguments, "sm_90", pch_folder=None)
    script = (tmp_path / "build" / SCRIPT).read_text()
    host, device = (line for line in script.splitlines() if "-fsyntax-only" in line or "-cubin" in line)
    assert torch_std(tmp_path) in host and "-DHOST_ONLY_FLAG" in host and "-DTORCH_EXTENSION_NAME=ext" in host  # as torch
    assert "-arch=sm_90" in device and "-Xptxas -v" in device and "-O3" in device and "-gencode" not in device
    assert "torch/include" in device and "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE" in device
    assert "TORCH_EXTENSION_NAME" not in plan.cflags and "-DHOST_ONLY_FLAG" in plan.cflags  # the header's key
    with_header = plan_compile_only(tmp_path, "inline", "ext", arguments, "sm_90", pch_folder=tmp_path / "pch")
    script = (tmp_path / "build" / SCRIPT).read_text()
    host, device = (line for line in script.splitlines() if "-fsyntax-only" in line or "-cubin" in line)
    assert f"-I{tmp_path / 'pch'}" in host and str(tmp_path / 'pch') not in device and with_header.cflags == plan.cflags


def test_host_code_that_does_not_compile_is_a_compile_error() -> None:
    evaluation = evaluate(RELU, BROKEN_HOST, "cuda-compile-only", EvalPolicy())
    assert evaluation.verdict is Verdict.COMPILE_ERROR and "host code does not compile" in evaluation.reasons[0]
    assert "broken host binding" in evaluation.reasons[0]


def test_the_user_is_told_when_cuda_means_compile_only() -> None:
    from harness.device import device_notice

    assert "compile-only" in device_notice("cuda", "cuda-compile-only")
    assert device_notice("cuda", "cuda") is None and device_notice("auto", "cpu") is None


def test_the_host_check_uses_the_precompiled_header_for_its_flags(tmp_path: Path, monkeypatch) -> None:
    noted: list[str] = []
    monkeypatch.setattr(PrecompiledHeaders, "note_cold_build", lambda self, cflags: noted.append(cflags))
    service = BuildService(tmp_path, "nvcc-compile-only-sm_90", Limits(120, 4096, False), cuda_arch="sm_90")
    arguments = {"name": "tiny", "cpp_sources": "int host_side(int x) { return x; }", "no_implicit_headers": True,
                 "cuda_sources": "__global__ void tiny_kernel(float* y) { y[threadIdx.x] = 1.0f; }"}
    first = service({"kind": "inline", "arguments": dict(arguments)})
    assert first["ok"] and len(first["resources"]) == 1 and service.records[-1]["precompiled_header"] is False
    assert noted == [service.records[-1]["cflags"]] and torch_std(tmp_path / "probe") in noted[0]  # a cold build counts
    header = tmp_path / "pch" / service.headers.key(noted[0]) / "torch"
    header.mkdir(parents=True)
    (header / "extension.h.gch").write_bytes(b"gpch")  # GCC would ignore an invalid one; the plan must pick it
    second = service({"kind": "inline", "arguments": {**arguments, "cpp_sources": "int host_side(int x) { return 1; }"}})
    assert second["ok"] and service.records[-1]["precompiled_header"] is True and len(noted) == 1
