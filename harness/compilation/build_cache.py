"""Content-addressed builds, the child's side: `load_inline` / `load` become requests to the parent.

A candidate names its extension whatever it likes; two candidates that both say `name="relu"` would otherwise
share torch's default build folder and one would silently load the other's kernel. Every build is keyed by a
hash of everything that determines the binary (never the name), built by the parent's build service
(`harness/compilation/build_service.py`) in a fresh folder, and imported here from the read-only cache.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable

from harness.verification.source_scan import own_ops

BUILD_FORMAT = 3  # what a cache entry holds; raised when that changes (2: parent-planned builds, cubins;
#                   3: compile-only CUDA with torch's own flags, -std=c++20)
LOG_NAME = "build.log"


def read_log(path: Path) -> str:
    """A build's log or output file, or "" where it was never written."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


class BuildFailed(RuntimeError):
    """The compiler or linker rejected the candidate's sources; the message carries the log."""


def build_key(kind: str, arguments: dict[str, Any], torch_version: str) -> str:
    material = json.dumps({"kind": kind, "args": arguments, "torch": torch_version, "format": BUILD_FORMAT,
                           "python": sys.version_info[:2]}, sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()


class KernelSwitch:
    """Counts calls into the candidate's own extension functions and, when `poison` is on, fills what they
    return (or, for functions that return nothing, the tensors they were given) with a pattern of finite values
    (`_poison`): a knock-out run in
    which a forward that never depended on its kernel still returns the right answer."""

    def __init__(self) -> None:
        self.calls = 0
        self.poison = False
        self.wrapped = 0
        self.depth = 0  # inside one of the candidate's own functions (what a compute census attributes to it)
        self.clocked = False  # during a census only: the time spent inside the candidate's own functions
        self.own_s = 0.0
        self.auditing = False  # an audit batch among the timed calls: its calls are checked for a disguise
        self.own_modes = 0  # dispatch modes of the harness's own on now (the census's)
        self.disguised: list[str] = []  # calls whose arguments or a torch-function mode could answer for the kernel

    def wrap(self, module: Any) -> Any:
        proxy = types.ModuleType(getattr(module, "__name__", "extension"))
        for name in dir(module):
            value = getattr(module, name)
            if callable(value) and not name.startswith("__"):
                setattr(proxy, name, self._wrap(value))
                self.wrapped += 1
            elif not name.startswith("__") or name == "__doc__":
                setattr(proxy, name, value)
        return proxy

    def wrap_ops(self, namespaces: dict[str, list[str]]) -> None:
        """The operators a light (stable-ABI) build registered, `torch.ops.<ns>.<op>`, replaced in their namespace
        by counting, poisonable wrappers; their overloads (`.default`) too, each a stand-in that reads as the real
        overload for everything but a call (torch resolves `ns.op.default` through the namespace under a dispatch
        mode: it reads the schema and calls it inside the outer call, which counts it once)."""
        import torch

        for namespace, names in namespaces.items():
            holder = getattr(torch.ops, namespace)
            for name in names:
                try:
                    packet = getattr(holder, name)
                    wrapper = self._wrap(packet)
                    for overload in packet.overloads():  # an honest `.default` call is the kernel's too
                        real = getattr(packet, overload)
                        setattr(wrapper, overload, _Overload(real, self._wrap(real)))
                    setattr(holder, name, wrapper)
                except (AttributeError, RuntimeError):  # declared in a comment, or never registered
                    continue
                self.wrapped += 1

    def _wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        switch = self

        def kernel(*args: Any, **kwargs: Any) -> Any:
            outer = switch.depth == 0  # (a dispatch mode resolves `.default` again inside the call: one call)
            switch.calls += outer
            disguise = _disguise(args, kwargs, switch.own_modes) if switch.auditing and outer else None  # (~0.5 us)
            if disguise and len(switch.disguised) < 5:
                switch.disguised.append(f"{getattr(function, '__name__', 'kernel')}: {disguise}")
            switch.depth += 1
            given = _copies(args, kwargs) if switch.poison else []  # (the knock-out's call only)
            started = time.perf_counter() if switch.clocked and switch.depth == 1 else None
            try:
                result = function(*args, **kwargs)
            finally:
                switch.depth -= 1
                if started is not None:
                    switch.own_s += time.perf_counter() - started
            if switch.poison:  # what it returned, or where it returns no tensor, the tensors it wrote into (never
                _poison(result if _holds_tensor(result) else _written(given))  # a parameter it only read)
            return result

        kernel.__name__ = getattr(function, "__name__", "kernel")
        return kernel

    def watch_graphs(self, graph_class: Any) -> None:
        """CUDA graphs are a legitimate way to launch one's own kernels: a graph that captured calls of the
        candidate's functions counts them again at each replay, and in the knock-out run it does not replay (its
        kernels are the candidate's: poisoned, they produce nothing). A graph of torch ops alone counts nothing
        and replays as usual, so forward still reads as a ghost."""
        switch = self
        begin, end, replay = graph_class.capture_begin, graph_class.capture_end, graph_class.replay

        def capture_begin(graph: Any, *args: Any, **kwargs: Any) -> Any:
            graph._kernelwright_calls_at_begin = switch.calls
            return begin(graph, *args, **kwargs)

        def capture_end(graph: Any, *args: Any, **kwargs: Any) -> Any:
            result = end(graph, *args, **kwargs)
            graph._kernelwright_kernels = switch.calls - getattr(graph, "_kernelwright_calls_at_begin", switch.calls)
            return result

        def replayed(graph: Any, *args: Any, **kwargs: Any) -> Any:
            kernels = getattr(graph, "_kernelwright_kernels", 0)
            switch.calls += kernels
            if kernels and switch.poison:
                return None
            return replay(graph, *args, **kwargs)

        graph_class.capture_begin, graph_class.capture_end, graph_class.replay = capture_begin, capture_end, replayed


def _poison(value: Any) -> None:
    """Finite values of both signs and magnitudes from 0.01 to 5e4 (inside float16's range), in a pattern no kernel
    computes: NaN would survive `out + k * 0`, carrying a kernel's output to a library answer it never touched, and
    values of one small range could all fall on one side of a threshold the library applies after an honest kernel
    (relu(x) > 6 read as "still right"); integers and booleans a pattern too."""
    import torch

    if isinstance(value, torch.Tensor):
        with torch.no_grad():
            index = torch.arange(value.numel(), device=value.device, dtype=torch.int64)
            pattern = (index * 7919 + 13) % 1009
            if value.is_floating_point() or value.is_complex():
                scale = torch.pow(10.0, (index % 5 - 2).double())
                poisoned = (pattern.double() - 504.0) * scale / 10.0
            else:
                poisoned = pattern % 2 if value.dtype == torch.bool else pattern % 127
            value.copy_(poisoned.to(value.dtype).view(value.shape))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _poison(item)


class _Overload:
    """An operator overload's stand-in: a call goes through the switch, anything else reads the real overload."""

    def __init__(self, real: Any, wrapped: Callable[..., Any]) -> None:
        self._real, self._wrapped = real, wrapped

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _copies(args: tuple, kwargs: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Each tensor argument with a copy of it, taken before the knock-out's call."""
    import torch

    values = [*args, *kwargs.values()]
    tensors = [t for v in values for t in (v if isinstance(v, (list, tuple)) else (v,)) if isinstance(t, torch.Tensor)]
    return [(t, t.detach().clone()) for t in tensors]


def _written(given: list[tuple[Any, Any]]) -> list[Any]:
    """The arguments the call changed (an `out` buffer), not the ones it read (inputs, the model's weights)."""
    import torch

    return [t for t, before in given if not torch.equal(t.detach(), before)]


def _holds_tensor(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (list, tuple)) and any(_holds_tensor(item) for item in value)


def _disguise(args: tuple, kwargs: dict[str, Any], own_modes: int = 0) -> str | None:
    """Why a call into the candidate's own function could be answered by PyTorch instead of its kernel: a
    torch-function mode or a dispatch mode of the candidate's on, an argument with its own `__torch_function__`
    (torch hands the call to it before the operator runs), or a tensor subclass (its `__torch_dispatch__` can).
    Plain tensors and parameters pass."""
    import torch

    if torch._C._is_torch_function_mode_enabled():
        return "called under a torch-function mode, which answers for the operator"
    if torch._C._len_torch_dispatch_stack() > own_modes:
        return "called under a dispatch mode, which answers for the operator"
    for value in [*args, *kwargs.values()]:
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, torch.Tensor):
                if type(item) not in (torch.Tensor, torch.nn.Parameter):
                    return f"an argument of tensor subclass {type(item).__name__}, which can answer for the operator"
                continue
            handler = getattr(type(item), "__torch_function__", None)
            if handler is not None:
                return (f"an argument of type {type(item).__name__} has its own __torch_function__, which answers "
                        "for the operator")
    return None


class CompiledOnly:
    """Stands in for the extension module: the kernel built, but nothing can run without a GPU."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        raise RuntimeError(f"compile-only device: {self._name}.{attribute} cannot run without a GPU")


class RemoteBuilder:
    """Stands in for torch's `load_inline` and `load` inside the child: every build is a request to the parent,
    which answers with a verified binary in the (read-only) cache; the child only imports it."""

    def __init__(self, channel: Any, switch: KernelSwitch, compile_only: bool = False) -> None:
        import torch.utils.cpp_extension as cpp

        self.channel = channel
        self.switch = switch
        self.compile_only = compile_only
        self.real_inline = cpp.load_inline
        self.real_load = cpp.load
        self.builds: list[dict[str, Any]] = []

    def install(self) -> None:
        import torch.utils.cpp_extension as cpp

        cpp.load_inline = self.load_inline
        cpp.load = self.load

    def load_inline(self, *args: Any, **kwargs: Any) -> Any:
        arguments = dict(inspect.signature(self.real_inline).bind(*args, **kwargs).arguments)
        return self._request("inline", arguments)

    def load(self, *args: Any, **kwargs: Any) -> Any:
        arguments = dict(inspect.signature(self.real_load).bind(*args, **kwargs).arguments)
        paths = arguments.get("sources")
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths or [])
        arguments["sources"] = [{"name": str(p), "text": Path(p).read_text(errors="replace")} for p in items]
        return self._request("load", arguments)

    def _request(self, kind: str, arguments: dict[str, Any]) -> Any:
        self.channel.send({"build": {"kind": kind, "arguments": arguments}})
        reply = self.channel.receive().get("built") or {}
        self.builds.append({"name": arguments.get("name"), "ok": bool(reply.get("ok"))})
        if not reply.get("ok"):
            raise BuildFailed(str(reply.get("error") or "the build failed"))
        if self.compile_only:
            return CompiledOnly(str(reply.get("name")))
        folder = Path(str(reply["folder"]))
        binary = folder / str(reply["binary"])
        if hashlib.sha256(binary.read_bytes()).hexdigest() != reply.get("sha256"):
            raise BuildFailed("the cached binary does not match its manifest")
        module = _import_built(str(reply["name"]), binary, bool(reply.get("is_python_module", True)))
        if module is None:  # a plain library whose operators registered themselves: count and poison those
            self.switch.wrap_ops(own_ops(_source_text(arguments)))
            return None
        return self.switch.wrap(module)


def _source_text(arguments: dict[str, Any]) -> str:
    parts: list[Any] = [arguments.get("cpp_sources"), arguments.get("cuda_sources")]
    parts += [s.get("text") for s in arguments.get("sources") or [] if isinstance(s, dict)]
    flat = [p for part in parts for p in ([part] if isinstance(part, str) else part or []) if isinstance(p, str)]
    return "\n".join(flat)


def _import_built(name: str, library: Path, is_python_module: bool) -> Any:
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
