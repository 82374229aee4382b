"""`kernelwright optimize-model`: a user's model file in, its hot regions profiled and extracted as problems
(`--plan` stops there), each optimized by the agent, the accepted ones composed back as guarded modules into
`patched.py`, and the whole model judged by the harness at every input set. The work is in regions/."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from harness.device import resolve_device
from harness.paths import home
from kernelwright.eval_service import UsageError
from regions.model_file import ModelFileError
from regions.plan import Plan, plan_model

Progress = Callable[[str], None]


def model_folder(path: Path, out: Path | None) -> Path:
    """Where a model's plan, regions and patch go: OUT, else <home>/models/<stem>-<hash of the file>."""
    if out is not None:
        return out
    if not path.is_file():
        raise UsageError(f"{path}: no such model file")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
    return home() / "models" / f"{path.stem}-{digest}"


def make_plan(path: Path, device: str, out: Path | None, min_share: float, max_regions: int,
              progress: Progress | None = None) -> Plan:
    resolved = resolve_device(device)
    if resolved not in ("cpu", "cuda"):
        raise UsageError(f"optimize-model profiles and runs kernels on cpu or cuda, not {resolved}")
    try:
        return plan_model(path, resolved, model_folder(path, out), min_share, max_regions, progress)
    except ModelFileError as exc:
        raise UsageError(str(exc)) from None


def plan_summary(plan: Plan) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(plan)
