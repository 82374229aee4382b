"""The build process: `python -m harness.build_child WORK`. Runs in the jail with only WORK writable, builds the
extension described by WORK/request.json with torch's own `load_inline`/`load` (or nvcc for compile-only CUDA),
and writes WORK/status.json. It never imports candidate Python; the parent hashes what it produced."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from harness.build_cache import LOG_NAME, REQUEST, STATUS, StdoutToFile


def _native(work: Path, kind: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    import torch.utils.cpp_extension as cpp

    arguments = dict(arguments, name=name, build_directory=str(work / "build"), verbose=True)
    arguments.pop("use_pch", None)  # a shared PCH in site-packages races between parallel builds
    (work / "build").mkdir()
    if kind == "load":
        paths = []
        for index, source in enumerate(arguments["sources"]):
            path = work / "src" / f"{index}_{Path(source['name']).name}"
            path.parent.mkdir(exist_ok=True)
            path.write_text(source["text"])
            paths.append(str(path))
        arguments["sources"] = paths
    with StdoutToFile(work / LOG_NAME):
        (cpp.load if kind == "load" else cpp.load_inline)(**arguments)
    return {"ok": True, "binary": f"build/{name}.so", "is_python_module": arguments.get("is_python_module", True)}


def main() -> None:
    work = Path(sys.argv[1])
    request = json.loads((work / REQUEST).read_text())
    try:
        if request["mode"].startswith("nvcc-compile-only"):
            from harness.cuda_compile import compile_only

            status = compile_only(work, request["name"], request["arguments"], request["cuda_arch"])
        else:
            status = _native(work, request["kind"], request["name"], request["arguments"])
    except Exception as exc:  # the compiler's verdict, reported in full
        log = (work / LOG_NAME).read_text(errors="replace") if (work / LOG_NAME).exists() else ""
        status = {"ok": False, "error": f"{type(exc).__name__}: {exc}\n{log[-8000:]}"[:12000],
                  "trace": traceback.format_exc()[-2000:]}
    (work / STATUS).write_text(json.dumps(status))


if __name__ == "__main__":
    main()
