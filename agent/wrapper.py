"""The harness writes the Python file around a model's C++ op (the kernel-only contract, and a reply that holds a
complete light-form op but no file): `ModelNew` takes Model's constructor arguments and creates its parameters
with Model's own `__init__`, and `forward` calls the op with the values its schema names: forward's inputs,
Model's parameters and buffers (`linear.weight` is `linear_weight`), and its number attributes. The file is then
judged like any other; nothing here decides anything about the kernel."""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from kernelbench.problem import Problem

_LIBRARY = re.compile(r"STABLE_TORCH_LIBRARY\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")
_DEF = re.compile(r"\.def\(\s*\"(\w+)\((.*?)\)\s*->\s*([^\"]+)\"")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_FLAGS = '"-O3", "-DTORCH_TARGET_VERSION=0x020d000000000000"'


class WrapError(ValueError):
    """The op cannot be wired to the problem; the message says why (it goes back to the model)."""


@dataclass(frozen=True)
class Signature:
    """What the wrapper can pass to an op, by name: forward's inputs, then the module's values (name -> the
    Python expression that reads it in ModelNew, and its schema type)."""

    inputs: list[str]
    values: dict[str, tuple[str, str]]
    init: str  # Model.__init__'s source, as ModelNew's

    def names(self) -> str:
        """For the prompt: the argument names an op may declare, with their schema types."""
        listed = [f"Tensor {name}" for name in self.inputs] + [f"{kind} {name}" for name, (_, kind) in
                                                               self.values.items()]
        return ", ".join(listed)


def cpp_op(reply: str) -> str | None:
    """The last fenced block of a reply that declares and implements a light-form op (STABLE_TORCH_LIBRARY and
    its _IMPL) and defines no ModelNew: a complete kernel without its Python file."""
    for _, body in reversed(_FENCE.findall(reply)):
        if _LIBRARY.search(body) and "STABLE_TORCH_LIBRARY_IMPL" in body and "class ModelNew" not in body:
            return body.strip() + "\n"
    return None


_SIGNATURES: dict[str, Signature] = {}


def signature(problem: Problem) -> Signature:
    """Model's forward inputs, parameters, buffers and number attributes, read from an instance built on the
    meta device (no memory, no compute) with the problem's own constructor arguments (once per problem)."""
    if problem.fingerprint not in _SIGNATURES:
        _SIGNATURES[problem.fingerprint] = _signature(problem)
    return _SIGNATURES[problem.fingerprint]


def _signature(problem: Problem) -> Signature:
    import torch

    tree = ast.parse(problem.source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    methods = {f.name: f for f in model.body if isinstance(f, ast.FunctionDef)} if model else {}
    if "forward" not in methods or "__init__" not in methods:
        raise WrapError("the problem's Model has no __init__ or forward to wrap")
    namespace: dict[str, object] = {}
    try:
        exec(compile(problem.source, problem.file_name, "exec"), namespace)  # the problem is the trusted reference
        with torch.device("meta"):
            instance = namespace["Model"](*namespace["get_init_inputs"]())  # type: ignore[operator]
    except Exception as exc:  # a problem the meta device cannot build: no wrapper for it
        raise WrapError(f"the problem's Model cannot be built to read its parameters ({type(exc).__name__}: "
                        f"{exc})") from None
    values: dict[str, tuple[str, str]] = {}
    for name, _ in [*instance.named_parameters(), *instance.named_buffers()]:
        values[name.replace(".", "_")] = (f"self.{name}", "Tensor")
    for path, module in instance.named_modules():  # a parameter left out (bias=False): an optional tensor, None
        for attr in [a for a, v in module._parameters.items() if v is None]:
            dotted = f"{path}.{attr}" if path else attr
            values.setdefault(dotted.replace(".", "_"), (f"self.{dotted}", "Tensor?"))
    for path, module in instance.named_modules():
        for attr, value in vars(module).items():
            kind = _schema_type(value)
            if kind and not attr.startswith("_") and attr != "training":
                dotted = f"{path}.{attr}" if path else attr
                values.setdefault(dotted.replace(".", "_"), (f"self.{dotted}", kind))
    inputs = [a.arg for a in methods["forward"].args.args[1:]]
    init = " " * methods["__init__"].col_offset + (ast.get_source_segment(problem.source, methods["__init__"]) or "")
    init = re.sub(r"super\(\s*Model\s*,\s*self\s*\)", "super(ModelNew, self)", textwrap.dedent(init))
    return Signature(inputs, values, init)


def _schema_type(value: object) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, tuple) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return "int[]"
    return None


def _arguments(schema: str) -> list[tuple[str, str]]:
    """(type, name) of each argument of a schema's argument list ("Tensor x, int dim=1")."""
    arguments = []
    for part in filter(None, (p.strip() for p in schema.split(","))):
        words = part.split("=")[0].split()
        if len(words) < 2:
            raise WrapError(f"the op's schema argument {part!r} has no type and name")
        arguments.append((" ".join(words[:-1]), words[-1]))
    return arguments


def _call_arguments(arguments: list[tuple[str, str]], sig: Signature) -> list[str]:
    """The expression passed for each argument: by name first; an unknown tensor name takes the next unused
    forward input (then parameter) in order; an unknown number is an error that names what exists."""
    named = {name for _, name in arguments}
    spare = [n for n in sig.inputs if n not in named] + \
        [expr for n, (expr, kind) in sig.values.items() if kind == "Tensor" and n not in named]
    passed = []
    for kind, name in arguments:
        if name in sig.inputs:
            passed.append(name)
        elif name in sig.values:
            passed.append(sig.values[name][0])
        elif kind.startswith("Tensor") and spare:
            passed.append(spare.pop(0))
        else:
            raise WrapError(f"the op's argument {kind} {name} is none of the values the wrapper can pass "
                            f"({sig.names()}): name it after one of them")
    return passed


def wrap_op(problem: Problem, cpp: str, device: str) -> str:
    """A complete candidate file: `cpp` (a light-form op) built with load_inline, inside a ModelNew that creates
    Model's parameters and calls the op. Raises WrapError when the op cannot be wired to the problem."""
    library = _LIBRARY.search(cpp)
    ops = _DEF.findall(cpp)
    if library is None or not ops:
        raise WrapError("the C++ has no STABLE_TORCH_LIBRARY(<ns>, m) block with an m.def(\"op(...) -> ...\")")
    sig = signature(problem)
    errors = []
    for op, schema, _ in ops:
        try:
            passed = _call_arguments(_arguments(schema), sig)
        except WrapError as exc:
            errors.append(str(exc))
            continue
        return _file(library.group(1), op, cpp, passed, sig, device)
    raise WrapError(errors[0])


def _file(namespace: str, op: str, cpp: str, passed: list[str], sig: Signature, device: str) -> str:
    openmp = "omp" in cpp
    cflags = _FLAGS + (', "-fopenmp"' if openmp and device == "cpu" else "")
    sources = (f'cpp_sources=cpp_source, extra_cflags=[{cflags}]' + (', extra_ldflags=["-fopenmp"]' if openmp else "")
               if device == "cpu" else
               f'cpp_sources="", cuda_sources=cpp_source, extra_cflags=[{_FLAGS}], extra_cuda_cflags=[{_FLAGS}]')
    cpp_text = cpp.replace('"""', '\\"\\"\\"')
    return f'''import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
{cpp_text.strip()}
"""

load_inline(name="{namespace}", {sources}, is_python_module=False, no_implicit_headers=True)


class ModelNew(nn.Module):  # written by the harness around the model's op (kernel-only contract)
{textwrap.indent(sig.init, "    ")}

    def forward(self, {", ".join(sig.inputs)}):
        return torch.ops.{namespace}.{op}({", ".join(passed)})
'''
