"""GPU telemetry through NVML (nvidia-ml-py), taken in the child around timing: clocks before and after,
throttle reasons, temperature, power and other processes on the device. Missing NVML is a recorded reason."""

from __future__ import annotations

import os
from typing import Any

from harness.records import Check, Finding

THROTTLE_FLAGS = {0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
                  0x4: "sw_power_cap"}
SERIOUS = {"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"}


def snapshot(index: int = 0) -> dict[str, Any]:
    try:
        import pynvml
    except ImportError:
        return {"error": "nvidia-ml-py is not installed (pip install nvidia-ml-py)"}
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        processes = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return {
            "name": _text(pynvml.nvmlDeviceGetName(handle)), "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "memory_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "throttle": [name for bit, name in THROTTLE_FLAGS.items() if reasons & bit],
            "foreign_processes": [p.pid for p in processes if p.pid != os.getpid()],
        }
    except Exception as exc:  # NVML errors are many and driver-specific
        return {"error": f"NVML failed: {exc}"}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def telemetry_flags(before: dict[str, Any], after: dict[str, Any]) -> list[Finding]:
    """Reasons to distrust (and re-measure) a GPU timing."""
    flags = []
    throttled = SERIOUS & set(before.get("throttle", []) + after.get("throttle", []))
    if throttled:
        flags.append(Finding(Check.TELEMETRY, f"timed under throttling ({', '.join(sorted(throttled))})"))
    foreign = set(before.get("foreign_processes", [])) | set(after.get("foreign_processes", []))
    if foreign:
        flags.append(Finding(
            Check.TELEMETRY, f"other processes were using the GPU while timing (pids {sorted(foreign)})"))
    if before.get("sm_clock_mhz") and after.get("sm_clock_mhz") and \
            after["sm_clock_mhz"] < 0.9 * before["sm_clock_mhz"]:
        flags.append(Finding(
            Check.TELEMETRY, f"SM clock fell from {before['sm_clock_mhz']} to {after['sm_clock_mhz']} MHz"))
    return flags
