"""What every handler of the child program shares: the failure it reports for the candidate, the phase log the
parent reads when the child dies, the result file, and the facts about the process (device, network namespace,
harness functions replaced). Runs in the candidate's (or the reference's) process."""

from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Any

from harness.child import job as J
from harness.values.integrity import identity_snapshot, replaced_since

_perf_counter = time.perf_counter  # bound before any candidate code runs


class EventLog:
    """Append-only phase markers, flushed at once so the parent sees where a dead child stopped."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "a", buffering=1)

    def write(self, **event: Any) -> None:
        event["t"] = _perf_counter()
        self.file.write(json.dumps(event) + "\n")
        self.file.flush()


class CandidateFailure(Exception):
    """A failure of the candidate, classified for the parent."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def short_traceback(exc: BaseException, limit: int = 6) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-limit)
    return "".join(lines)[-4000:]


def describe_device(device: str, threads: int) -> dict[str, Any]:
    import platform

    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                            "platform": platform.platform()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, sm=f"{props.major}.{props.minor}", cuda=torch.version.cuda,
                    gpu_memory_gb=round(props.total_memory / 2**30, 1), driver=_nvidia_driver())
    else:
        info.update(cpu=_cpu_model(), threads=threads, cpu_count=os.cpu_count())
    return info


def _nvidia_driver() -> str | None:
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    words = [w for w in first.split() if w[:1].isdigit() and "." in w]
    return words[0] if words else first.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def network_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


def note_replacements(identities: dict[str, int], integrity: list[str], during: str) -> None:
    replaced = replaced_since(identities)
    if replaced:
        integrity.append(f"monkeypatch: {', '.join(replaced[:8])} replaced during {during}")
        identities.update(identity_snapshot())  # report each replacement once


def write_result(scratch: Path, result: J.ChildResult) -> None:
    temporary = scratch / (J.RESULT_FILE + ".tmp")
    temporary.write_text(json.dumps(result.model_dump(), default=str))
    os.replace(temporary, scratch / J.RESULT_FILE)
