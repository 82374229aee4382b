"""The compile-only CUDA build process: `python -m harness.build_child WORK`. Runs in the jail with only WORK
writable, compiles what WORK/request.json describes with nvcc (no GPU here) and writes WORK/status.json. It never
imports candidate Python; the parent hashes what it produced. (Native builds need no Python: the parent plans them
and the jail runs ninja, see `harness/native_build.py`.)"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from harness.build_cache import LOG_NAME, REQUEST, STATUS


def main() -> None:
    work = Path(sys.argv[1])
    request = json.loads((work / REQUEST).read_text())
    try:
        from harness.cuda_compile import compile_only

        status = compile_only(work, request["name"], request["arguments"], request["cuda_arch"])
    except Exception as exc:  # the compiler's verdict, reported in full
        log = (work / LOG_NAME).read_text(errors="replace") if (work / LOG_NAME).exists() else ""
        status = {"ok": False, "error": f"{type(exc).__name__}: {exc}\n{log[-8000:]}"[:12000],
                  "trace": traceback.format_exc()[-2000:]}
    (work / STATUS).write_text(json.dumps(status))


if __name__ == "__main__":
    main()
