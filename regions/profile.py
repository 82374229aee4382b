"""Where the model's time goes at the shapes it is served at: every module's time per forward (forward hooks,
clocked with the device synchronized), every operator's (torch.profiler), each summed over the input sets by their
weights; and, on the first call at each set, every leaf module's inputs and output captured for extraction.

The user's model is trusted code (it is the reference), so it runs in this process; no candidate ever does."""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from regions.model_file import ModelFile, load_module, raw_sets

WARMUP = 3
REPEATS = 25


@dataclass
class Capture:
    """One module call at one input set: its positional inputs and its output, cloned when it returned."""

    args: list[Any]
    output: Any
    kwargs: list[str]  # keyword argument names (a region takes positional tensors only)
    aliased: bool  # the output shares storage with an input: an in-place module


@dataclass
class ModuleTime:
    path: str
    type_name: str
    leaf: bool
    ms: float = 0.0  # weighted over the sets, per forward of the model
    self_ms: float = 0.0  # of it, in its own forward (not in its submodules)
    per_set_ms: dict[int, float] = field(default_factory=dict)
    calls: dict[int, int] = field(default_factory=dict)  # calls per forward, per set
    shapes: dict[int, list[list[int]]] = field(default_factory=dict)  # first call's input shapes per set


@dataclass
class Profile:
    device: str
    model_ms: float  # weighted over the sets, without hooks
    per_set_ms: dict[int, float]
    weights: dict[int, float]
    modules: dict[str, ModuleTime]
    operators: list[tuple[str, float]]  # (operator, weighted ms per forward), the heaviest first
    captures: dict[str, dict[int, Capture]]  # leaf module path -> set index -> its first call
    model: Any = None  # the profiled instance (its modules' parameters are what regions carry)

    def share(self, ms: float) -> float:
        return ms / self.model_ms if self.model_ms else 0.0


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


@contextmanager
def _threads(device: str) -> Iterator[None]:
    """One thread on the CPU, as the harness times reference and candidate (policy.cpu_threads)."""
    import torch

    before = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _median_ms(model: Any, inputs: list[Any], device: str) -> float:
    samples = []
    for _ in range(REPEATS):
        _sync(device)
        started = time.perf_counter()
        model(*inputs)
        _sync(device)
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


def _storages(values: Any) -> set[int]:
    import torch

    items = values if isinstance(values, (list, tuple)) else [values]
    return {v.untyped_storage().data_ptr() for v in items if isinstance(v, torch.Tensor)}


class _Hooks:
    """Inclusive time of every module's calls (a stack per module: a module may call itself), and the first call's
    inputs and output of every leaf module while `capturing`."""

    def __init__(self, model: Any, device: str) -> None:
        self.device, self.capturing = device, False
        self.names = {id(m): name or "(model)" for name, m in model.named_modules()}
        self.leaves = {id(m) for m in model.modules() if not list(m.children())}
        self.started: dict[int, list[float]] = {}
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.captured: dict[str, Capture] = {}
        self.shapes: dict[str, list[list[int]]] = {}
        self.handles = [h for m in model.modules() for h in (
            m.register_forward_pre_hook(self._pre, with_kwargs=True),
            m.register_forward_hook(self._post, with_kwargs=True))]

    def _pre(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        name = self.names.get(id(module), "?")
        if self.capturing and name not in self.shapes:
            self.shapes[name] = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
            if id(module) in self.leaves:
                self.captured[name] = Capture(_clone(list(args)), None, sorted(kwargs), False)
        _sync(self.device)
        self.started.setdefault(id(module), []).append(time.perf_counter())

    def _post(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        _sync(self.device)
        elapsed = time.perf_counter() - self.started[id(module)].pop()
        name = self.names.get(id(module), "?")
        self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
        self.calls[name] = self.calls.get(name, 0) + 1
        capture = self.captured.get(name)
        if self.capturing and capture is not None and capture.output is None:
            capture.output = _clone(output)
            capture.aliased = bool(_storages(output) & _storages(list(args)))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _operators(model: Any, inputs: list[Any], device: str) -> dict[str, float]:
    """Self time per operator per forward (torch.profiler, device time where there is a GPU)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    calls = 5
    with profile(activities=activities) as prof:
        for _ in range(calls):
            model(*inputs)
        _sync(device)
    table: dict[str, float] = {}
    for event in prof.key_averages():
        us = event.self_device_time_total if device == "cuda" else event.self_cpu_time_total
        if us > 0 and not event.key.startswith("ProfilerStep"):
            table[event.key] = us / 1e3 / calls
    return table


def _record(model: Any, runs: list[dict[str, float]], hooks: _Hooks, index: int, weight: float, model_ms: float,
            times: dict[str, ModuleTime]) -> None:
    """Each module's share of the model's time in the same run (a ratio survives a loaded machine better than two
    medians taken apart), as ms of the model timed without hooks."""
    for name, m in model.named_modules():
        children = [f"{name}.{c}" if name else c for c, _ in m.named_children()]
        name = name or "(model)"
        record = times.setdefault(name, ModuleTime(name, type(m).__name__, not children))
        share = statistics.median(r.get(name, 0.0) / r["(model)"] for r in runs)
        own = statistics.median(max(r.get(name, 0.0) - sum(r.get(c, 0.0) for c in children), 0.0) / r["(model)"]
                                for r in runs)
        record.per_set_ms[index] = share * model_ms
        record.calls[index] = hooks.calls.get(name, 0)
        if name in hooks.shapes:
            record.shapes[index] = hooks.shapes[name]
        record.ms += share * model_ms * weight
        record.self_ms += own * model_ms * weight


def profile_model(model_file: ModelFile, device: str, seed: int = 0) -> Profile:
    """Time the model and its modules at every input set; capture each leaf module's first call per set."""
    import torch

    module = load_module(model_file.source, model_file.path)
    pairs = raw_sets(module, model_file.path)
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).to(device).eval()
    times: dict[str, ModuleTime] = {}
    per_set: dict[int, float] = {}
    operators: dict[str, float] = {}
    captures: dict[str, dict[int, Capture]] = {}
    weights = {s.index: s.weight for s in model_file.sets}
    with torch.no_grad(), _threads(device):
        for entry in model_file.sets:
            inputs = [x.to(device) for x in pairs[entry.index][1]]
            for _ in range(WARMUP):
                model(*inputs)
            per_set[entry.index] = _median_ms(model, inputs, device)
            hooks = _Hooks(model, device)
            try:
                hooks.capturing = True
                model(*inputs)
                hooks.capturing = False
                runs: list[dict[str, float]] = []
                for _ in range(REPEATS):
                    hooks.seconds, hooks.calls = {}, {}
                    model(*inputs)
                    runs.append(dict(hooks.seconds))
            finally:
                hooks.remove()
            _record(model, runs, hooks, entry.index, entry.weight, per_set[entry.index], times)
            for name, capture in hooks.captured.items():
                captures.setdefault(name, {})[entry.index] = capture
            for op, ms in _operators(model, inputs, device).items():
                operators[op] = operators.get(op, 0.0) + ms * entry.weight
    model_ms = sum(per_set[i] * weights[i] for i in per_set)
    ranked = sorted(operators.items(), key=lambda kv: -kv[1])
    return Profile(device, model_ms, per_set, weights, times, ranked, captures, model)
