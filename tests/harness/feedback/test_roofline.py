"""Roofline counts for the bundled problems, and the floor they imply."""

from __future__ import annotations

import pytest

from harness.feedback.device_specs import DeviceSpec, cpu_spec, gpu_spec
from harness.feedback.roofline import floor_ms, roofline
from kernelbench.bundled import bundled_problems, find_bundled


@pytest.mark.parametrize("name, flops, min_bytes", [
    ("relu", 0, 2 * 16 * 16384 * 4),                                      # elementwise: read + write
    ("Square_matrix_multiplication", 2 * 256**3, 3 * 256 * 256 * 4),      # 2 N^3 FLOPs, A + B + C
    ("Conv2d_standard", 2 * 4 * 16 * 30 * 30 * 3 * 3 * 3, (4 * 3 * 32 * 32 + 4 * 16 * 30 * 30 + 16 * 3 * 9) * 4),
    ("Gemm_BiasAdd_ReLU", 2 * 64 * 512 * 256, (64 * 512 + 64 * 256 + 256 * 512 + 256) * 4),
])
def test_counts(name: str, flops: int, min_bytes: int) -> None:
    record = roofline(find_bundled(name), "cuda", {"gpu": "NVIDIA H100 80GB HBM3"}, 1.0, 0.5)
    assert record["matmul_conv_flops"] == flops and record["min_bytes"] == min_bytes


@pytest.mark.parametrize("name, elementwise", [("relu", 16 * 16384), ("Softmax", 16 * 16384),
                                               ("Gemm_BiasAdd_ReLU", 64 * 256)])
def test_elementwise_softmax_and_norm_problems_are_not_zero_flop(name: str, elementwise: int) -> None:
    """One FLOP per element for every op the matmul/conv counter leaves out (issue 34: "0 FLOP" for a ReLU)."""
    record = roofline(find_bundled(name), "cuda", {"gpu": "NVIDIA H100 80GB HBM3"}, 1.0, 0.5)
    assert record["flops"] - record["matmul_conv_flops"] >= elementwise


def test_every_bundled_problem_has_counts() -> None:
    for problem in bundled_problems():
        record = roofline(problem, "cuda", {"gpu": "NVIDIA H200"}, 1.0, 1.0)
        assert record["min_bytes"] > 0 and record["floor_ms"] > 0, problem.key


def test_floor_is_the_slower_of_compute_and_memory() -> None:
    spec = DeviceSpec("test", fp32_tflops=1.0, memory_gbs=1.0)
    assert floor_ms(1e12, 1e6, spec) == pytest.approx(1000.0)  # compute-bound: 1 s
    assert floor_ms(1e3, 1e9, spec) == pytest.approx(1000.0)   # memory-bound: 1 s
    matmul = roofline(find_bundled("Square_matrix_multiplication"), "cuda", {"gpu": "NVIDIA H100 80GB HBM3"}, 0.1, 0.05)
    assert matmul["bound"] == "compute" and matmul["candidate_fraction"] == pytest.approx(2 * matmul["ref_fraction"])


def test_specs_by_device_name() -> None:
    assert gpu_spec("NVIDIA H100 80GB HBM3").memory_gbs == 3350.0
    assert gpu_spec("NVIDIA H100 PCIe").memory_gbs == 2000.0
    assert gpu_spec("NVIDIA H200").memory_gbs == 4800.0
    assert gpu_spec("Some Unknown GPU") is None
    cpu = cpu_spec()
    assert cpu.memory_gbs > 0 and cpu.fp32_tflops > 0 and cpu.source == "measured here"


def test_unknown_gpu_is_a_reason() -> None:
    assert "no peak rates" in roofline(find_bundled("relu"), "cuda", {"gpu": "Mystery"}, 1.0, 1.0)["error"]
