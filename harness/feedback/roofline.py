"""Roofline floor of a problem: the fewest FLOPs and bytes any correct kernel must spend, over the device's peaks.
It puts "fraction of roofline" next to every timing and flags timings that physics does not allow."""

from __future__ import annotations

from typing import Any

from harness.feedback.device_specs import DeviceSpec, cpu_spec, gpu_spec
from kernelbench.problem import Problem, ProblemError
from kernelbench.shrink import measure


def device_spec(device: str, device_info: dict[str, Any]) -> DeviceSpec | None:
    if device == "cuda":
        return gpu_spec(str(device_info.get("gpu", "")))
    if device == "cpu":
        return cpu_spec()
    return None


def floor_ms(flops: float, min_bytes: float, spec: DeviceSpec) -> float:
    compute = flops / (spec.fp32_tflops * 1e12) if spec.fp32_tflops else 0.0
    memory = min_bytes / (spec.memory_gbs * 1e9) if spec.memory_gbs else 0.0
    return max(compute, memory) * 1e3


def roofline(problem: Problem, device: str, device_info: dict[str, Any], ref_ms: float | None,
             candidate_ms: float | None) -> dict[str, Any]:
    """FLOPs (torch's FLOP counter on the meta device for matmul and convolution, one per element for every other
    op: elementwise, softmax and norm problems are not "0 FLOP"), minimum bytes (inputs + outputs + parameters, each
    moved once), the floor in ms, and each timing's fraction of it (1.0 = at the roofline)."""
    try:
        cost = measure(problem.source)
    except ProblemError as exc:
        return {"error": str(exc)}
    spec = device_spec(device, device_info)
    flops = cost.all_flops  # matmul/conv by torch's counter, every other op at one FLOP per element
    record: dict[str, Any] = {"flops": flops, "matmul_conv_flops": cost.flops, "min_bytes": cost.bytes}
    if spec is None:
        record["error"] = f"no peak rates known for {device_info.get('gpu', device)}"
        return record
    floor = floor_ms(flops, cost.bytes, spec)
    record.update(floor_ms=floor, spec=spec.sheet(), bound="compute" if flops / (spec.fp32_tflops * 1e12 or 1)
                  > cost.bytes / (spec.memory_gbs * 1e9 or 1) else "memory")
    for name, measured in (("ref", ref_ms), ("candidate", candidate_ms)):
        if measured:
            record[f"{name}_fraction"] = floor / measured
    return record
