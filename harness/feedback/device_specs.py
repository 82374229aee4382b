"""Peak rates of the devices kernelwright times on: the roofline floor's denominators and the judge's spec sheet.
Numbers are vendor dense peaks (no sparsity); the CPU's are measured on the spot, single-threaded like timing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    fp32_tflops: float
    memory_gbs: float  # DRAM bandwidth, GB/s
    l2_mb: float = 0.0
    sms: int = 0
    smem_per_sm_kb: int = 0
    source: str = "vendor spec sheet"

    def sheet(self) -> str:
        parts = [f"{self.name}: {self.fp32_tflops:g} TFLOP/s FP32, {self.memory_gbs:g} GB/s memory"]
        if self.sms:
            parts.append(f"{self.sms} SMs, {self.smem_per_sm_kb} KB shared memory per SM, {self.l2_mb:g} MB L2")
        return ", ".join(parts) + f" ({self.source})"


GPU_SPECS = {
    "H200": DeviceSpec("H200", 67.0, 4800.0, 50, 132, 228),
    "H100 PCIe": DeviceSpec("H100 PCIe", 51.0, 2000.0, 50, 114, 228),
    "H100": DeviceSpec("H100 SXM", 67.0, 3350.0, 50, 132, 228),
    "A100": DeviceSpec("A100", 19.5, 2039.0, 40, 108, 164),
    "L40S": DeviceSpec("L40S", 91.6, 864.0, 96, 142, 100),
    "L4": DeviceSpec("L4", 30.3, 300.0, 48, 58, 100),
    "A10": DeviceSpec("A10", 31.2, 600.0, 6, 72, 100),
    "RTX 4090": DeviceSpec("RTX 4090", 82.6, 1008.0, 72, 128, 100),
    "T4": DeviceSpec("T4", 8.1, 320.0, 4, 40, 64),
}


def gpu_spec(name: str) -> DeviceSpec | None:
    """The spec for a device name such as 'NVIDIA H100 80GB HBM3' (longest matching key wins)."""
    matches = [key for key in GPU_SPECS if key.lower() in name.lower()]
    return GPU_SPECS[max(matches, key=len)] if matches else None


@lru_cache(maxsize=1)
def cpu_spec() -> DeviceSpec:
    """Measured once per process with one thread: a large copy (bandwidth) and a matmul (FLOP rate)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        source = torch.ones(8 * 2**20)  # 32 MiB, beyond the caches
        target = torch.empty_like(source)
        target.copy_(source)
        started = time.perf_counter()
        for _ in range(5):
            target.copy_(source)
        bandwidth = 5 * 2 * source.numel() * 4 / (time.perf_counter() - started) / 1e9
        a = torch.randn(512, 512)
        a @ a
        started = time.perf_counter()
        for _ in range(5):
            a @ a
        tflops = 5 * 2 * 512**3 / (time.perf_counter() - started) / 1e12
    finally:
        torch.set_num_threads(previous)
    return DeviceSpec("CPU (1 thread)", round(tflops, 4), round(bandwidth, 1), source="measured here")
