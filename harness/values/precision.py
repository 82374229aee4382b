"""The process-wide precision settings a computation runs under: TF32 for matmul and convolution, reduced-precision
reductions, the float32 matmul precision, cuDNN's and the deterministic-algorithm switches.

A speedup is only a speedup between two computations made under the same settings: CUDA Agent's published speedups
were inflated by a baseline timed at full float32 precision against candidates run with TF32. So every process that
computes something a verdict or a baseline reads (the parent's reference, the reference's timing processes, the
candidate's, the baselines') records these, and the parent checks them equal: a candidate that changes one is caught
as it changes any global (harness/child/verdicts.py), a reference or baseline process that differs is refused.
Values are strings so that a record compares exactly, whatever the installed torch names them."""

from __future__ import annotations

from typing import Any, Callable

UNAVAILABLE = "unavailable"


def _readers() -> dict[str, Callable[[], Any]]:
    import torch

    backends = torch.backends
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "cuda.matmul.allow_tf32": lambda: backends.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            lambda: backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            lambda: backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cudnn.allow_tf32": lambda: backends.cudnn.allow_tf32,
        "cudnn.enabled": lambda: backends.cudnn.enabled,
        "cudnn.benchmark": lambda: backends.cudnn.benchmark,
        "cudnn.deterministic": lambda: backends.cudnn.deterministic,
        "mkldnn.enabled": lambda: backends.mkldnn.enabled,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        # torch 2.9's per-backend fp32 precision ("ieee", "tf32", "bf16"; "none" defers to the older switches)
        "fp32_precision": lambda: backends.fp32_precision,
        "cuda.matmul.fp32_precision": lambda: backends.cuda.matmul.fp32_precision,
        "cudnn.conv.fp32_precision": lambda: backends.cudnn.conv.fp32_precision,
        "cudnn.rnn.fp32_precision": lambda: backends.cudnn.rnn.fp32_precision,
        "mkldnn.matmul.fp32_precision": lambda: backends.mkldnn.matmul.fp32_precision,
        "mkldnn.conv.fp32_precision": lambda: backends.mkldnn.conv.fp32_precision,
    }


def precision_settings() -> dict[str, str]:
    """This process's settings now (a setting this torch lacks reads `unavailable`)."""
    settings = {}
    for name, read in _readers().items():
        try:
            settings[name] = str(read())
        except Exception:  # noqa: BLE001 - an older or CPU-only torch without the switch
            settings[name] = UNAVAILABLE
    return settings


def settings_differences(expected: dict[str, str] | None, actual: dict[str, str] | None) -> list[str]:
    """`name: expected -> actual` for each setting that differs (nothing when either side was not recorded)."""
    if not expected or not actual or not isinstance(actual, dict):
        return []
    return [f"{name} {expected[name]} -> {actual.get(name, 'missing')}" for name in sorted(expected)
            if actual.get(name) != expected[name]]
