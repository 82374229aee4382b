"""Leaf modules defined in the user's own model file (an RMSNorm, a SwiGLU written as tensor arithmetic on the
module's own parameters): their class is copied into the region's problem, with the file's imports, and rebuilt
from the constructor arguments the module kept as attributes (`self.eps = eps`). A wrong rebuild (an argument it
did not keep, a global the class reads) is caught by the region's fidelity check, like any other."""

from __future__ import annotations

import ast
import inspect
from typing import Any

LITERALS = (int, float, bool, str, type(None))


def _literal(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_literal(v) for v in value)
    return isinstance(value, LITERALS)


def _class_node(source: str, name: str) -> ast.ClassDef | None:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _plain_bases(node: ast.ClassDef) -> bool:
    """Bases from torch only (nn.Module, torch.nn.Module): a base defined in the file is not copied."""
    return all(ast.unparse(b) in ("nn.Module", "torch.nn.Module", "Module") for b in node.bases) and \
        not node.keywords and not node.decorator_list


def user_class(module: Any, source: str) -> bool:
    """Whether `module`'s class is defined at the top level of the user's file, on a torch base, and leaf."""
    cls = type(module)
    if list(module.children()) or not cls.__module__.startswith("kernelwright_regions_") or cls.__name__ == "Model":
        return False
    node = _class_node(source, cls.__name__)
    return node is not None and _plain_bases(node)


def custom_constructor(module: Any) -> str | None:
    """`Name(arg=value, ...)` from the attributes named like its __init__'s parameters; None when one without a
    default was not kept (or not a literal), or __init__ takes *args/**kwargs."""
    cls = type(module)
    if "__init__" not in cls.__dict__:
        return f"{cls.__name__}()"  # nn.Module's own constructor: nothing to pass
    try:
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    arguments = []
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            return None
        value = module.__dict__.get(parameter.name, inspect.Parameter.empty)
        if value is not inspect.Parameter.empty and _literal(value):
            arguments.append(f"{parameter.name}={value!r}")
        elif parameter.default is inspect.Parameter.empty:
            return None
    return f"{cls.__name__}({', '.join(arguments)})"


def definitions(source: str, names: list[str]) -> str:
    """The user's top-level imports and the named classes, as source for a region's problem."""
    tree = ast.parse(source)
    imports = [line for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
               and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
               and (line := ast.unparse(n)) not in ("import torch", "import torch.nn as nn")]  # the problem has them
    classes = [ast.get_source_segment(source, n) or ast.unparse(n) for name in dict.fromkeys(names)
               if (n := _class_node(source, name)) is not None]
    return "\n".join(imports) + ("\n\n\n" + "\n\n\n".join(classes) if classes else "")
