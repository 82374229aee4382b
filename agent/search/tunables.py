"""A candidate's declared tunables and the variants they expand to (pure source text; nothing runs).

The documented form (agent/contract.py tells the coder): a module-level literal

    TUNE = {"BLOCK": [64, 32, 128], "UNROLL": [4, 1, 2]}

whose lists hold the values to try, the first being the default, and C++ that reads each as a compile-time
constant from the FIRST value (e.g. `extra_cflags=[f"-D{k}={v[0]}" for k, v in TUNE.items()]`, or `#define` lines
written from TUNE into the source string). A variant is the same file with every list pinned to one value, so each
variant is a distinct source, and its defines a distinct content-hashed build.

Names and values reach the judge's prompt (each variant's label, `NAME=value`, in the tuning table), so a declaration
holds only what a compile-time constant needs: names that are C/C++ identifiers, values that are numbers, booleans
or short identifiers (a `-D` value or an enum's name). Anything else is refused with a reason that does not repeat
it (issue 44: a string value carrying a fence's closing marker and a forged instruction)."""

from __future__ import annotations

import ast
import itertools
import math
import re
from dataclasses import dataclass

NAME = "TUNE"
MAX_NAMES, MAX_VALUES, MAX_PRODUCT = 4, 8, 4096
Value = int | float | str | bool
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")  # a string value: a short identifier, nothing else
_MAX_NAME = 32


def _constant(value: object) -> bool:
    """A value a compile-time constant can take, and that a prompt can show as it is."""
    if isinstance(value, bool) or isinstance(value, int):
        return abs(value) < 10 ** 12
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and _WORD.fullmatch(value) is not None


class TuneError(ValueError):
    """A TUNE declaration that is not the documented form; the message says what to write instead."""


@dataclass(frozen=True)
class Variant:
    choice: dict[str, Value]
    source: str
    default: bool

    @property
    def label(self) -> str:
        return ",".join(f"{name}={value}" for name, value in self.choice.items())


def _declaration(source: str) -> ast.Assign | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id == NAME:
            return node
    return None


def tunables(source: str) -> dict[str, list[Value]] | None:
    """The declared values per name (None: the file declares no TUNE). TuneError for a malformed declaration."""
    node = _declaration(source)
    if node is None:
        return None
    try:
        declared = ast.literal_eval(node.value)
    except ValueError:
        raise TuneError(f"{NAME} must be a literal dict of lists of constants, e.g. "
                        f'{NAME} = {{"BLOCK": [64, 32, 128]}}') from None
    if not isinstance(declared, dict) or not declared or len(declared) > MAX_NAMES:
        raise TuneError(f"{NAME} must be a dict of 1 to {MAX_NAMES} names, each with a list of values")
    for name, values in declared.items():
        if not (isinstance(name, str) and name.isascii() and name.isidentifier() and len(name) <= _MAX_NAME):
            raise TuneError(f"{NAME}: every name must be a C/C++ identifier of at most {_MAX_NAME} ASCII characters "
                            "(a name that is not was refused, and is not repeated here)")
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_VALUES or len(set(values)) != len(values):
            raise TuneError(f"{NAME}[{name!r}] must be a list of 1 to {MAX_VALUES} distinct constants, the first the "
                            "default")
        if not all(_constant(v) for v in values):
            raise TuneError(f"{NAME}[{name!r}]: every value must be a number, a boolean or a short identifier "
                            "(letters, digits and _, at most 32): a value that is not was refused, and is not "
                            "repeated here")
    return declared


def _pinned(source: str, node: ast.Assign, choice: dict[str, Value]) -> str:
    """The file with TUNE's literal replaced by one value per name (the lines around it untouched)."""
    lines = source.splitlines(keepends=True)
    start, end = node.value.lineno - 1, (node.value.end_lineno or node.value.lineno) - 1
    head = lines[start][:node.value.col_offset]
    tail = lines[end][node.value.end_col_offset:]
    literal = "{" + ", ".join(f"{name!r}: [{value!r}]" for name, value in choice.items()) + "}"
    return "".join(lines[:start]) + head + literal + tail + "".join(lines[end + 1:])


def variants(source: str, limit: int) -> list[Variant]:
    """Up to `limit` variants, the default first, then those nearest it (one name changed, then two, ...): a small
    budget explores each constant on its own before combinations. [] when the file declares nothing to tune."""
    declared = tunables(source)
    node = _declaration(source)
    if declared is None or node is None:
        return []
    names = list(declared)
    sizes = [len(declared[n]) for n in names]
    product = 1
    for size in sizes:
        product *= size
    if product > MAX_PRODUCT:
        raise TuneError(f"{NAME} declares {product} combinations; at most {MAX_PRODUCT}")
    indices = sorted(itertools.product(*(range(s) for s in sizes)), key=lambda ix: (sum(i > 0 for i in ix), ix))
    chosen = []
    for ix in indices[:max(0, limit)]:
        choice = {name: declared[name][i] for name, i in zip(names, ix)}
        chosen.append(Variant(choice, _pinned(source, node, choice), default=not any(ix)))
    return chosen
