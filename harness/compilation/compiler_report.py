"""Parse the CUDA compiler's resource report (`-Xptxas -v`): registers, shared memory, stack, spills."""

from __future__ import annotations

import re
from typing import Any

_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_PROPERTIES = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, "
                    r"(?P<loads>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<registers>\d+) registers")
_SMEM = re.compile(r"(?P<smem>\d+) bytes smem")


def _demangle(name: str) -> str:
    """Best-effort readable kernel name: `_Z11relu_kernelPKfPfi` -> `relu_kernel`."""
    match = re.match(r"_Z(\d+)(\w+)", name)
    if match:
        length = int(match.group(1))
        return match.group(2)[:length]
    return name


def parse_ptxas_report(log: str) -> list[dict[str, Any]]:
    """One record per kernel: name, arch, registers, shared_bytes, stack_bytes, spill_store/load_bytes."""
    kernels: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in log.splitlines():
        if entry := _ENTRY.search(line):
            mangled = entry["name"]
            current = kernels.setdefault(mangled, {"kernel": _demangle(mangled), "mangled": mangled,
                                                    "arch": entry["arch"]})
        elif props := _PROPERTIES.search(line):
            current = kernels.setdefault(props["name"], {"kernel": _demangle(props["name"]),
                                                         "mangled": props["name"]})
        elif current is not None and (frame := _FRAME.search(line)):
            current.update(stack_bytes=int(frame["stack"]), spill_store_bytes=int(frame["stores"]),
                           spill_load_bytes=int(frame["loads"]))
        elif current is not None and (used := _USED.search(line)):
            current["registers"] = int(used["registers"])
            smem = _SMEM.search(line)
            current["shared_bytes"] = int(smem["smem"]) if smem else 0
    return [k for k in kernels.values() if "registers" in k]
