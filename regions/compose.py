"""`patched.py`: the user's model with the accepted regions swapped for guarded kernels, written as one
KernelBench candidate (`ModelNew`) so that the harness judges the whole model exactly as it judges any kernel.

The guard is export-op's (kernelwright/export_op_templates.py), in the form a candidate may take: the kernel runs
only at the input and parameter signatures its op package was verified at (the `envelope` of its export.json) and
on that device, with no autograd in play; everywhere else the model's own modules run. The kernel is handed the
model's own parameters (bound, as export-op's `_run_kernel` binds them), so trained weights reach it. No
`torch.library` registration here: a candidate may not register operators (the static policy refuses it); the op
packages beside each region's best kernel are what a user ships, and this file is how their composition is proven.

Each region's candidate source is inlined with its top-level names prefixed (two regions may both define
`ModelNew` or `cpp_source`). `ModelNew` subclasses the user's `Model`: same constructor, same state_dict."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from regions.model_file import INPUT_FUNCTIONS


@dataclass(frozen=True)
class Accepted:
    """A region's verified kernel, ready to compose."""

    slug: str
    paths: list[str]  # the model's modules it replaces, in call order (a chain is consecutive in a Sequential)
    source: str  # the candidate file (ModelNew over the region's problem)
    envelope: list[dict[str, Any]]  # export.json's envelope: inputs and state signatures verified
    device: str
    speedup: float | None = None
    origin: str = ""  # where the kernel came from (its run and file)


GUARD = r'''
def _kw_signature(tensor, contiguous):
    shape = [list(tensor.shape), str(tensor.dtype).replace("torch.", "")]
    return shape + [tensor.is_contiguous()] if contiguous else shape


class _KwRegion:
    """One region: the model's own modules (the reference), the kernel module and where it was verified."""

    def __init__(self, modules, kernel, envelope, device):
        self.modules, self.kernel, self.envelope, self.device = modules, kernel, envelope, device
        self.names = [f"m{i}.{name}" for i, m in enumerate(modules) for name, _ in m.named_parameters()] + \
            [f"m{i}.{name}" for i, m in enumerate(modules) for name, _ in m.named_buffers()]
        self.bound = []
        self.pending = 0  # calls of the chain's later modules that the kernel has already computed
        self.counts = {"kernel": 0, "reference": 0}

    def state(self):
        return [t for m in self.modules for t in m.parameters()] + [t for m in self.modules for t in m.buffers()]

    def within(self, inputs, state):
        if any(t.device.type != self.device for t in (*inputs, *state)):
            return False
        call = {"inputs": [_kw_signature(t, True) for t in inputs], "state": [_kw_signature(t, False) for t in state]}
        return any(call == {"inputs": entry["inputs"], "state": entry["state"]} for entry in self.envelope)

    def bind(self, state):
        """The model's own tensors in the kernel module (again only when they are other tensor objects)."""
        if len(self.bound) == len(state) and all(a is b for a, b in zip(self.bound, state)):
            return
        for name, tensor in zip(self.names, state):
            prefix, _, leaf = name.rpartition(".")
            owner = self.kernel.get_submodule(prefix)
            (owner._parameters if leaf in owner._parameters else owner._buffers)[leaf] = tensor
        self.bound = list(state)

    def head(self, original):
        def forward(*inputs):
            state = self.state()
            grad = torch.is_grad_enabled() and any(t.requires_grad for t in (*inputs, *state))
            if grad or not self.within(list(inputs), state):
                self.counts["reference"] += 1
                return original(*inputs)
            self.counts["kernel"] += 1
            self.bind(state)
            self.pending = len(self.modules) - 1
            return self.kernel(*inputs)
        return forward

    def tail(self, original):
        def forward(x):
            if self.pending:
                self.pending -= 1
                return x
            return original(x)
        return forward


def _kw_patch(model, paths, kernel, envelope, device):
    """Route the model's modules at `paths` through one region (the first runs the kernel, the rest pass its
    result on); returns the region, whose `counts` say where its calls went."""
    modules = [model.get_submodule(path) for path in paths]
    region = _KwRegion(modules, kernel.eval(), envelope, device)
    for index, target in enumerate(modules):
        target.forward = region.head(target.forward) if index == 0 else region.tail(target.forward)
    return region
'''

MODEL_NEW = '''

_KW_REGIONS = [
{entries}
]


class ModelNew(Model):
    """The model, its regions routed through their guarded kernels (same constructor, same state_dict)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kw_regions = {{slug: _kw_patch(self, paths, kernel(), envelope, device)
                           for slug, paths, kernel, envelope, device in _KW_REGIONS}}

    def forward(self, *inputs):
        return super().forward(*inputs)
'''


def strip_input_functions(source: str) -> str:
    """The user's file without get_inputs/get_init_inputs/get_input_sets (inputs always come from the problem)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    spans = [(min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno) for n in tree.body
             if isinstance(n, ast.FunctionDef) and n.name in INPUT_FUNCTIONS]
    for start, end in sorted(spans, reverse=True):
        del lines[start - 1:end]
    return "\n".join(lines).rstrip() + "\n"


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: set[str], prefix: str) -> None:
        self.names, self.prefix = names, prefix

    def _new(self, name: str) -> str:
        return f"{self.prefix}{name}" if name in self.names else name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._new(node.id)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node


def namespaced(source: str, prefix: str) -> str:
    """The candidate with every name it binds at module level (not its imports) prefixed."""
    tree = ast.parse(source)
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return ast.unparse(_Renamer(names, prefix).visit(tree))


def compose(model_source: str, origin: str, accepted: list[Accepted]) -> str:
    """The patched model file: the user's model, each region's kernel, the guard, and `ModelNew`."""
    parts = [f'"""kernelwright optimize-model: {origin} with {len(accepted)} region(s) routed through guarded '
             'kernels.\nJudge it with `kernelwright eval MODEL_FILE patched.py`; each region\'s op package is named '
             'below."""\n', "import torch\n", strip_input_functions(model_source)]
    entries = []
    for index, region in enumerate(accepted, 1):
        prefix = f"_kw_r{index}_"
        parts.append(f"\n\n# ---- region {region.slug}: {' -> '.join(region.paths)} "
                     f"({region.origin or 'kernel'}) ----\n")
        parts.append(namespaced(region.source, prefix) + "\n")
        envelope = [{"inputs": e["inputs"], "state": e["state"]} for e in region.envelope]
        entries.append(f"    ({region.slug!r}, {region.paths!r}, {prefix}ModelNew, {envelope!r}, "
                       f"{region.device!r}),")
    parts.append("\n\n# ---- the guard (export-op's, as a candidate may write it) ----" + GUARD)
    parts.append(MODEL_NEW.format(entries="\n".join(entries)))
    return "".join(parts)
