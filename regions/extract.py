"""Regions from a profile: hot leaf modules and fusible chains (in an `nn.Sequential`, a Linear or a convolution
and the pointwise modules after it) written as KernelBench problems at the shapes served, each checked to
reproduce the region's output on the captured inputs with the model's own parameters before anything is optimized.
What cannot be extracted is listed with the reason, never dropped."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from regions.constructors import CHAIN_HEADS, KNOWN, POINTWISE, constructor, fixed_dims
from regions.custom import definitions, user_class
from regions.model_file import ModelFile, ModelFileError, load_module
from regions.profile import Capture, Profile

FIDELITY_RTOL = 1e-5  # the same operators on the same values: only summation order may differ


@dataclass
class Region:
    slug: str  # a file-name-safe name: mlp_0_linear_gelu
    paths: list[str]  # module paths in the user's model, in call order
    types: list[str]
    constructors: list[str]
    ms: float  # weighted per forward
    share: float  # of the model's time
    main_set: int  # the input set whose shapes the problem is written at (the most time there)
    served: dict[int, list[list[int]]]  # per input set: the first input's shape
    dtype: str
    constants: dict[str, int] = field(default_factory=dict)  # the problem's size constants at the main set
    served_sizes: list[dict[str, int]] = field(default_factory=list)  # other served shapes as size constants
    source: str = ""
    fidelity: str = ""  # how it reproduced the captured outputs


@dataclass
class Skipped:
    path: str
    share: float
    reason: str


@dataclass
class Extraction:
    regions: list[Region]
    unhandled: list[Skipped]  # hot, but not extractable (reason)
    cold: list[Skipped]  # extractable or not, below the share that pays for a search


def _slug(paths: list[str], types: list[str]) -> str:
    stem = re.sub(r"[^0-9a-zA-Z]+", "_", paths[0]).strip("_") or "model"
    return f"{stem}_{'_'.join(t.lower() for t in types)}"


def _chains(model: Any) -> list[list[str]]:
    """Module paths grouped into regions: a chain head with the pointwise modules after it inside a plain
    nn.Sequential, else every leaf module alone."""
    import torch.nn as nn

    grouped: list[list[str]] = []
    taken: set[str] = set()
    for name, module in model.named_modules():
        if type(module) is not nn.Sequential:
            continue
        children = list(module.named_children())
        index = 0
        while index < len(children):
            child_name, child = children[index]
            chain = [child_name]
            if type(child).__name__ in CHAIN_HEADS:
                while index + len(chain) < len(children) and _pointwise(children[index + len(chain)][1]):
                    chain.append(children[index + len(chain)][0])
            if len(chain) > 1:
                paths = [f"{name}.{c}" if name else c for c in chain]
                grouped.append(paths)
                taken.update(paths)
            index += len(chain)
    for name, module in model.named_modules():
        if name and not list(module.children()) and name not in taken:
            grouped.append([name])
    return grouped


def _pointwise(module: Any) -> bool:
    """A chain's tail: a pointwise module kernelwright can rebuild (an in-place one ends the chain)."""
    return type(module).__name__ in POINTWISE and constructor(module) is not None


def _blocker(profile: Profile, paths: list[str], source: str) -> str | None:
    """Why this group cannot become a problem, or None."""
    import torch

    modules = dict(profile.model.named_modules())
    for path in paths:
        module = modules[path]
        if user_class(module, source) and constructor(module, source) is None:
            return (f"{type(module).__name__}'s constructor arguments are not all kept as attributes of the same "
                    "name (or are not literals): kernelwright cannot rebuild it")
        if constructor(module, source) is None:
            what = "an in-place module (its output aliases its input)" if getattr(module, "inplace", False) \
                else f"no constructor known for {type(module).__module__}.{type(module).__name__}"
            return f"{what} (kernelwright rebuilds {KNOWN})"
    for index, capture in profile.captures.get(paths[0], {}).items():
        if capture.kwargs:
            return f"called with keyword arguments ({', '.join(capture.kwargs)}): a problem takes positional tensors"
        if not capture.args or not all(isinstance(a, torch.Tensor) for a in capture.args):
            return "called with non-tensor inputs: a problem's inputs are tensors"
    for path in paths:
        for capture in profile.captures.get(path, {}).values():
            if capture.aliased:
                return f"{path} works in place (its output shares storage with its input)"
            if not isinstance(capture.output, torch.Tensor):
                return f"{path} returns {type(capture.output).__name__}, not a tensor"
    return None


def _constants(module: Any, shape: list[int]) -> tuple[list[str], dict[str, int]]:
    """The input's dimensions as expressions: size constants (batch_size, dim1, ...) where free, literals where
    the parameters fix them."""
    fixed = fixed_dims(module, len(shape))
    names, constants = [], {}
    for axis, size in enumerate(shape):
        if axis in fixed:
            names.append(str(size))
        else:
            name = "batch_size" if axis == 0 else f"dim{axis}"
            constants[name] = size
            names.append(name)
    return names, constants


PROBLEM = '''"""kernelwright region {slug}: {described} of {origin}, {share:.1%} of the model's time, at the shapes
served (input set {set_number}). Generated by `kernelwright optimize-model`; the trained values of its parameters
are in the .state.pt file beside it (the harness draws its own: a kernel must hold for any)."""

import torch
import torch.nn as nn
{definitions}
{constants}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{members}

    def forward(self, x):
{calls}
        return x


def get_inputs():
    return [torch.randn({dims}, dtype=torch.{dtype})]


def get_init_inputs():
    return []
'''


def _source(region: Region, origin: str, dims: list[str], own: list[str], model_source: str) -> str:
    """The problem file; `own`: the region's module classes defined in the user's file (copied in)."""
    described = " -> ".join(f"{p} ({t})" for p, t in zip(region.paths, region.types))
    copied = f"{definitions(model_source, own)}\n\n" if own else ""
    return PROBLEM.format(definitions=copied,
        slug=region.slug, described=described, origin=origin, share=region.share, set_number=region.main_set + 1,
        constants="\n".join(f"{k} = {v}" for k, v in region.constants.items()),
        members="\n".join(f"        self.m{i} = {c}" for i, c in enumerate(region.constructors)),
        calls="\n".join(f"        x = self.m{i}(x)" for i in range(len(region.paths))),
        dims=", ".join(dims), dtype=region.dtype)


def region_state(profile: Profile, region: Region) -> dict[str, Any]:
    """The user's trained parameters and buffers under the region problem's names (m0.weight, ...)."""
    modules = dict(profile.model.named_modules())
    return {f"m{i}.{k}": v.detach().cpu().clone()
            for i, path in enumerate(region.paths) for k, v in modules[path].state_dict().items()}


def _region(profile: Profile, model_file: ModelFile, paths: list[str]) -> Region:
    modules = dict(profile.model.named_modules())
    ms = sum(profile.modules[p].ms for p in paths)
    first = profile.modules[paths[0]]
    main = max(first.per_set_ms, key=lambda i: sum(profile.modules[p].per_set_ms[i] for p in paths) *
               profile.weights[i])
    capture = profile.captures[paths[0]][main]
    region = Region(_slug(paths, [type(modules[p]).__name__ for p in paths]), paths,
                    [type(modules[p]).__name__ for p in paths],
                    [constructor(modules[p], model_file.source) or "" for p in paths],
                    ms, profile.share(ms), main, {i: s[0] for i, s in first.shapes.items() if s},
                    str(capture.args[0].dtype).removeprefix("torch."))
    dims, region.constants = _constants(modules[paths[0]], list(capture.args[0].shape))
    own = [type(modules[p]).__name__ for p in paths if user_class(modules[p], model_file.source)]
    region.source = _source(region, model_file.name, dims, own, model_file.source)
    for index, shape in sorted(region.served.items()):
        _, sizes = _constants(modules[paths[0]], shape)
        if index != main and sizes != region.constants and sizes not in region.served_sizes:
            region.served_sizes.append(sizes)
    return region


def check_fidelity(profile: Profile, region: Region) -> str:
    """The region's problem, with the user's parameters, on every captured input: the captured output, or
    ModelFileError saying where it differs. Also that the problem's own get_inputs() runs at the main set."""
    import torch

    module = load_module(region.source, f"{region.slug}/problem.py")
    try:
        model = module.Model(*module.get_init_inputs()).to(profile.device).eval()
        try:
            model.load_state_dict(region_state(profile, region))
        except RuntimeError as exc:
            raise ModelFileError(f"region {region.slug}: its parameters are not the modules' ({exc})") from None
        with torch.no_grad():
            own = model(*[x.to(profile.device) for x in module.get_inputs()])
            last = profile.captures[region.paths[-1]]
            worst = 0.0
            for index, capture in sorted(profile.captures[region.paths[0]].items()):
                want = last[index].output
                got = model(*capture.args)
                if got.shape != want.shape or got.dtype != want.dtype:
                    raise ModelFileError(f"region {region.slug}: at input set {index + 1} it gives "
                                         f"{tuple(got.shape)} {got.dtype}, the model's modules gave "
                                         f"{tuple(want.shape)} {want.dtype}")
                scale = float(want.abs().max()) if want.numel() else 0.0
                error = float((got - want).abs().max()) if want.numel() else 0.0
                worst = max(worst, error / max(scale, 1e-12))
                if error > FIDELITY_RTOL * max(scale, 1.0):
                    raise ModelFileError(f"region {region.slug}: at input set {index + 1} its output differs from "
                                         f"the model's by {error:.3g} (scale {scale:.3g})")
    except ModelFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - a copied class that reads the file's globals, a wrong rebuild
        raise ModelFileError(f"region {region.slug}: running its problem failed ({type(exc).__name__}: {exc})") \
            from None
    finally:
        sys.modules.pop(module.__name__, None)
    want_main = profile.captures[region.paths[-1]][region.main_set].output
    if own.shape != want_main.shape:
        raise ModelFileError(f"region {region.slug}: its get_inputs() gives an output of {tuple(own.shape)}, the "
                             f"model's is {tuple(want_main.shape)}")
    sets = len(profile.captures[region.paths[0]])
    return f"reproduces the model's output at {sets} input set{'s' * (sets != 1)} (max relative error {worst:.1e})"


def _self_time(profile: Profile, min_share: float) -> list[Skipped]:
    """Time a module spends in its own forward (functional calls, not submodules): not extractable as modules."""
    found = []
    for path, record in profile.modules.items():
        if not record.leaf and profile.share(record.self_ms) >= min_share:
            found.append(Skipped(path, profile.share(record.self_ms), f"computed in {record.type_name}.forward "
                                 "itself (functional calls such as torch.matmul or q @ k.T, not submodules): "
                                 "kernelwright captures a region's inputs and routes it to its kernel at a module's "
                                 "call, and a functional call has none; move that arithmetic into a module of your "
                                 "file (an nn.Module whose forward it is) to make it a region"))
    return found


def extract(profile: Profile, model_file: ModelFile, min_share: float = 0.02, max_regions: int = 4,
            only: list[str] | None = None) -> Extraction:
    """Regions worth a search, hottest first, each checked for fidelity; the rest listed with the reason.
    `only`: module paths; a region is searched only when it starts at one of them."""
    groups = sorted(_chains(profile.model), key=lambda g: -sum(profile.modules[p].ms for p in g))
    regions: list[Region] = []
    unhandled = _self_time(profile, min_share)
    cold: list[Skipped] = []
    for paths in groups:
        share = profile.share(sum(profile.modules[p].ms for p in paths))
        label = " -> ".join(paths)
        if not all(profile.modules[p].calls and any(profile.modules[p].calls.values()) for p in paths):
            continue  # never called at the served shapes: no time to win
        if only and paths[0] not in only:
            cold.append(Skipped(label, share, "not among --only"))
            continue
        if share < min_share:
            cold.append(Skipped(label, share, f"below --min-share {min_share:.0%}"))
            continue
        blocker = _blocker(profile, paths, model_file.source)
        if blocker:
            unhandled.append(Skipped(label, share, blocker))
            continue
        if len(regions) >= max_regions:
            cold.append(Skipped(label, share, f"over --max-regions {max_regions}"))
            continue
        region = _region(profile, model_file, paths)
        try:
            region.fidelity = check_fidelity(profile, region)
        except ModelFileError as exc:
            unhandled.append(Skipped(label, share, f"its extracted problem does not reproduce it: {exc}"))
            continue
        regions.append(region)
    _unique_slugs(regions)
    return Extraction(regions, sorted(unhandled, key=lambda s: -s.share), cold)


def _unique_slugs(regions: list[Region]) -> None:
    seen: dict[str, int] = {}
    for region in regions:
        seen[region.slug] = seen.get(region.slug, 0) + 1
        if seen[region.slug] > 1:
            region.slug = f"{region.slug}_{seen[region.slug]}"
