"""Content-addressed builds for candidates' `load_inline` / `load` calls (runs inside the child).

A candidate names its extension whatever it likes; two candidates that both say `name="relu"` would otherwise
share torch's default build folder and one would silently load the other's kernel. Here every build is keyed
by a hash of everything that determines the binary, built in a fresh folder (so a killed build's lock file
can never hang the next one) and moved into the cache only when it finished. A later call with identical
sources and flags imports the finished binary without running the compiler at all.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

OK_MARKER = "BUILD_OK"
LOG_NAME = "build.log"


class BuildFailed(RuntimeError):
    """The compiler or linker rejected the candidate's sources; the message carries the log."""


class BuildRecorder:
    """Collects what the child reports about builds: keys, cache hits, seconds, logs."""

    def __init__(self) -> None:
        self.builds: list[dict[str, Any]] = []


def build_key(kind: str, arguments: dict[str, Any], torch_version: str) -> str:
    material = json.dumps({"kind": kind, "args": arguments, "torch": torch_version,
                           "python": sys.version_info[:2]}, sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()


def _source_text(keyed: dict[str, Any]) -> str:
    """The code that was compiled (as the static policy re-scans it), and the flags it was compiled with."""
    parts: list[str] = []
    for field in ("cpp_sources", "cuda_sources", "sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
        value = keyed.get(field)
        parts.extend([value] if isinstance(value, str) else [str(v) for v in value or []])
    return "\n".join(parts)


def _read_sources(paths: Any) -> list[str]:
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths or [])
    return [Path(p).read_text(errors="replace") for p in items]


def _import_built(name: str, folder: Path, is_python_module: bool) -> Any:
    library = folder / f"{name}.so"
    if not is_python_module:
        import torch

        torch.ops.load_library(str(library))
        return None
    spec = importlib.util.spec_from_file_location(name, library,
                                                  loader=importlib.machinery.ExtensionFileLoader(name, str(library)))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _StdoutToFile:
    """Send fd 1 and 2 (where ninja writes in verbose mode) to a log file for the duration of a build."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> "_StdoutToFile":
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = (os.dup(1), os.dup(2))
        self.file = open(self.path, "ab")
        os.dup2(self.file.fileno(), 1)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        for fd in self.saved:
            os.close(fd)
        self.file.close()


class CachedBuilder:
    """Wraps torch's `load_inline` and `load` with the content-addressed cache."""

    mode = "native"  # part of every key: a compile-only object file is never mistaken for a loadable build

    def __init__(self, cache_root: Path, recorder: BuildRecorder, extra_cuda_cflags: list[str] | None = None):
        import torch
        import torch.utils.cpp_extension as cpp

        self.cache_root = cache_root
        self.recorder = recorder
        self.extra_cuda_cflags = extra_cuda_cflags or []
        self.torch_version = torch.__version__
        self.real_inline = cpp.load_inline
        self.real_load = cpp.load

    def install(self) -> None:
        import torch.utils.cpp_extension as cpp

        cpp.load_inline = self.load_inline
        cpp.load = self.load

    def load_inline(self, *args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(self.real_inline).bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        return self._build("inline", arguments, arguments, self.real_inline)

    def load(self, *args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(self.real_load).bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        keyed = dict(arguments, sources=_read_sources(arguments["sources"]))
        return self._build("load", arguments, keyed, self.real_load)

    def _build(self, kind: str, arguments: dict[str, Any], keyed: dict[str, Any],
               real: Callable[..., Any]) -> Any:
        for ignored in ("name", "build_directory", "verbose", "use_pch", "keep_intermediates"):
            keyed.pop(ignored, None)
        if arguments.get("cuda_sources") or arguments.get("with_cuda"):
            arguments["extra_cuda_cflags"] = list(arguments.get("extra_cuda_cflags") or []) + self.extra_cuda_cflags
            keyed["extra_cuda_cflags"] = arguments["extra_cuda_cflags"]
        key = build_key(f"{self.mode}:{kind}", keyed, self.torch_version)
        name = f"kw_{key[:24]}"
        final = self.cache_root / key
        record: dict[str, Any] = {"key": key, "requested_name": arguments.get("name"), "folder": str(final),
                                  "binary": str(final / f"{name}.so"), "source_text": _source_text(keyed)[:200_000],
                                  "cuda": bool(arguments.get("cuda_sources") or arguments.get("with_cuda"))}
        self.recorder.builds.append(record)
        if (final / OK_MARKER).exists():
            started = time.perf_counter()
            module = self._load_finished(name, final, arguments)
            record.update(cache_hit=True, seconds=time.perf_counter() - started,
                          log=(final / LOG_NAME).read_text(errors="replace")[-20000:])
            return module
        return self._fresh_build(name, final, arguments, real, record)

    def _load_finished(self, name: str, final: Path, arguments: dict[str, Any]) -> Any:
        return _import_built(name, final, arguments.get("is_python_module", True))

    def _fresh_build(self, name: str, final: Path, arguments: dict[str, Any], real: Callable[..., Any],
                     record: dict[str, Any]) -> Any:
        work = self.cache_root / f"{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        work.mkdir(parents=True)
        log = work / LOG_NAME
        arguments.update(name=name, build_directory=str(work), verbose=True)
        if "use_pch" in arguments:
            arguments["use_pch"] = False  # a shared PCH in site-packages races between parallel builds
        started = time.perf_counter()
        record.update(cache_hit=False)
        try:
            with _StdoutToFile(log):
                module = real(**arguments)
        except Exception as exc:  # the compiler's verdict, reported in full
            text = log.read_text(errors="replace")
            record.update(seconds=time.perf_counter() - started, log=text[-20000:])
            shutil.rmtree(work, ignore_errors=True)
            raise BuildFailed(f"{exc}\n{text[-8000:]}") from None
        text = log.read_text(errors="replace")
        record.update(seconds=time.perf_counter() - started, log=text[-20000:])
        (work / OK_MARKER).write_text(name)
        try:
            os.rename(work, final)
        except OSError:  # another process finished the same build first; ours stays loaded from `work`
            pass
        return module


def remove_stale_builds(cache_root: Path, older_than_s: float = 6 * 3600) -> None:
    """Drop unfinished build folders left by killed evaluations."""
    if not cache_root.is_dir():
        return
    now = time.time()
    for entry in cache_root.glob("*.tmp-*"):
        try:
            if now - entry.stat().st_mtime > older_than_s:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue
