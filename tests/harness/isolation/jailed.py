"""Running a shell script in the jail, for the containment tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.isolation.sandbox import Limits
from harness.isolation.session import run_jailed

LIMITS = Limits(timeout_s=30, memory_mb=2048, address_space_limit=False)
# The jail needs CAP_SYS_ADMIN for its namespaces (root here and in CI); elsewhere evaluations record `NOT isolated`.
NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="the jail's namespaces need root on this machine")


def jailed(tmp_path: Path, script: str) -> str:
    """What `script` printed, run by `sh` in the jail with `tmp_path/work` as its own folder."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    run_jailed(["sh", "-c", script], work, LIMITS)
    return (work / "process.log").read_text()
