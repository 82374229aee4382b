"""Failure reasons a model can act on: a build log reduced to its compiler errors, a traceback to the candidate's
own frames and the exception, each within a character budget.

A failed build's log opens with ninja's banner and the compiler command (printed twice, hundreds of characters of
paths and flags); the `error:` line a model needs sits after them. `digest_reason` keeps the diagnostics (gcc/clang
`file:line:col: error:` and nvcc `file(line): error:` forms, with the source line and caret the compiler prints
after them), from anywhere in the log, and maps each line of `main.cpp`/`cuda.cu` back to the line of the
candidate's C++ string (and of its Python file) that the compiler printed. Pure functions over text: nothing here
reads the build folder, so a digest can be made from a stored evaluation.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

DEFAULT_BUDGET = 3000
_CONTEXT_LINES = 4
_LINE_CAP = 300

_GCC = re.compile(r"^(?P<file>[^\s:(][^:\n]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
                  r"(?P<severity>fatal error|error|warning|note):\s*(?P<message>.*)$")
_NVCC = re.compile(r"^(?P<file>[^\s(][^(\n]*?)\((?P<line>\d+)\):\s*"
                   r"(?P<severity>catastrophic error|error|warning|remark)(?:\s*#[\w-]+)?:\s*(?P<message>.*)$")
_LOOSE_ERROR = re.compile(r"(^|\s)(fatal error|error|undefined reference|undefined symbol|ptxas fatal|nvcc fatal)"
                          r"\b", re.IGNORECASE)
_SNIPPET = re.compile(r"^\s*(?P<line>\d+)\s*\|\s?(?P<code>.*)$")
_NOISE = re.compile(r"^(ninja: |\[\d+/\d+\] |FAILED: |\d+ errors? detected in the compilation|"
                    r"In file included from|\s+from \S+:\d+[:,]|compilation terminated\.)")
_BUILD_HEADERS = ("Error building extension", "nvcc failed", "the host code does not compile")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_CANDIDATE_FILES = ("candidate.py",)


@dataclass
class Diagnostic:
    """One compiler diagnostic and the lines printed with it (source line, caret, fix-it)."""

    file: str
    line: int | None
    severity: str
    message: str
    context: list[str] = field(default_factory=list)
    where: str = ""  # the candidate's own line, when it could be mapped back

    def snippet(self) -> str | None:
        """The source line the compiler printed: gcc's `  13 |   code`, or nvcc's bare line before its caret."""
        for index, text in enumerate(self.context):
            match = _SNIPPET.match(text)
            if match and match.group("line") == str(self.line):
                return match.group("code")
            if text.strip() == "^" and index > 0:
                return self.context[index - 1]
        return None

    def render(self) -> str:
        place = self.where or (f"{_short_path(self.file)}:{self.line}" if self.line else _short_path(self.file))
        head = f"{place}: {self.severity}: {self.message}"
        return "\n".join([_cap(head), *(_cap(text) for text in self.context)])


@dataclass(frozen=True)
class SourceString:
    """A multi-line string literal of the candidate's Python file (its C++/CUDA source, typically)."""

    name: str  # the variable it is assigned to, or "a string"
    first_line: int  # the file line of the string's first line
    lines: tuple[str, ...]


def candidate_strings(source: str) -> list[SourceString]:
    """Every multi-line string literal whose lines map one-to-one onto the file's lines (triple-quoted, no
    escaped newlines), with the name it is assigned to."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[id(node.value)] = node.targets[0].id
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value):
            continue
        lines = tuple(node.value.split("\n"))
        if node.end_lineno is None or node.end_lineno - node.lineno + 1 != len(lines):
            continue
        found.append(SourceString(names.get(id(node), "a string"), node.lineno, lines))
    return found


def map_to_candidate(diagnostic: Diagnostic, strings: list[SourceString]) -> str:
    """`line 13 of cpp_source (line 17 of your file)` when the printed source line is found in one of the
    candidate's strings at or just before the compiler's line number (a generated file prepends a few lines);
    empty when it cannot be told."""
    code = diagnostic.snippet()
    if diagnostic.line is None or code is None or not code.strip():
        return ""
    best: tuple[int, SourceString, int] | None = None
    for string in strings:
        for index, text in enumerate(string.lines):
            shift = diagnostic.line - (index + 1)
            if text.strip() == code.strip() and shift >= 0 and (best is None or shift < best[0]):
                best = (shift, string, index + 1)
    if best is None:
        return ""
    _, string, line = best
    return f"line {line} of `{string.name}` (line {string.first_line + line - 1} of your file)"


def compiler_diagnostics(log: str) -> list[Diagnostic]:
    """Every gcc/clang/nvcc diagnostic in the log, with the indented lines printed after it."""
    found: list[Diagnostic] = []
    current: Diagnostic | None = None
    for raw in log.splitlines():
        text = raw.rstrip()
        match = _GCC.match(text) or _NVCC.match(text)
        if match:
            current = Diagnostic(match.group("file"), int(match.group("line")), match.group("severity"),
                                 match.group("message").strip())
            found.append(current)
        elif current is not None and text and not _NOISE.match(text) and len(current.context) < _CONTEXT_LINES \
                and (text[:1].isspace() or _SNIPPET.match(text)):
            current.context.append(text)
        else:
            current = None
    return found


def digest_build_log(log: str, source: str | None = None, budget: int = DEFAULT_BUDGET) -> str:
    """The log's errors (and the notes that follow them) with their source lines, mapped back to the candidate;
    the first error always, then from the tail as the budget allows. Without a recognisable diagnostic, the log's
    tail without ninja's banner and the compiler command lines."""
    diagnostics = compiler_diagnostics(log)
    errors = _with_notes(diagnostics)
    if not errors:
        return _tail_without_commands(log, budget)
    strings = candidate_strings(source) if source else []
    for diagnostic in errors:
        diagnostic.where = map_to_candidate(diagnostic, strings)
    blocks = [diagnostic.render() for diagnostic in errors]
    chosen = _within_budget(blocks, budget - 80)
    header = f"{len(errors)} compiler error(s)"
    if len(chosen) < len(blocks):
        header += f", {len(chosen)} shown (the first, then the last)"
    return header + ":\n" + "\n".join(blocks[index] for index in chosen)


def digest_traceback(text: str, budget: int = DEFAULT_BUDGET) -> str:
    """A Python traceback reduced to the candidate's own frames, the last frame and the exception: the
    harness's and torch's frames in between say nothing the model can change."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")), None)
    if start is None:
        return _clip_tail(text, budget)
    frames: list[tuple[str, str]] = []
    index = start + 1
    while index < len(lines):
        match = _FRAME.match(lines[index])
        if not match:
            break
        code = lines[index + 1].strip() if index + 1 < len(lines) and not _FRAME.match(lines[index + 1]) else ""
        frames.append((_frame_place(match), code))
        index += 1
        while index < len(lines) and (lines[index].startswith("    ") or not lines[index].strip()):
            index += 1
    exception = "\n".join(lines[index:]).strip()
    kept = [f for position, f in enumerate(frames) if f[0].startswith("your file") or position == len(frames) - 1]
    shown = [f"  {place}: {code}" if code else f"  {place}" for place, code in kept]
    head = "\n".join(lines[:start]).strip()
    body = "\n".join(([head] if head else []) + ["Traceback (your frames and the last one):", *shown])
    room = max(budget - len(body) - 1, budget // 3)
    return _clip_tail(body, budget - min(len(exception), room) - 1) + "\n" + exception[:room]


def digest_reason(reason: str, source: str | None = None, budget: int = DEFAULT_BUDGET) -> str:
    """One failure reason as a model should read it: build logs and tracebacks digested, anything else cut to
    the budget."""
    if reason.startswith(_BUILD_HEADERS) or (compiler_diagnostics(reason) and "error" in reason):
        first_line, _, log = reason.partition("\n")
        return _clip_tail(first_line, 200) + "\n" + digest_build_log(log, source, budget - min(len(first_line), 200))
    if "Traceback (most recent call last)" in reason:
        return digest_traceback(reason, budget)
    return reason if len(reason) <= budget else reason[:budget - 20] + " ... (cut)"


def headline(reason: str, source: str | None = None, limit: int = 200) -> str:
    """One line for a table: a build's first compiler error (at the candidate's line where it maps), a
    traceback's exception, else the reason's first line."""
    if reason.startswith(_BUILD_HEADERS) or "Traceback (most recent call last)" in reason:
        errors = _with_notes(compiler_diagnostics(reason))
        if errors:
            first = errors[0]
            first.where = map_to_candidate(first, candidate_strings(source) if source else [])
            line = first.render().split("\n", 1)[0]
        else:
            lines = [text for text in reason.strip().splitlines() if text.strip()]
            exceptions = [text for text in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", text)]
            line = (exceptions or lines or [""])[-1]
    else:
        line = reason.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[:limit - 4].rsplit(" ", 1)[0] + " ..."


def _with_notes(diagnostics: list[Diagnostic], notes_per_error: int = 2) -> list[Diagnostic]:
    """The errors, each with the first notes that follow it folded into its context (`candidate: ...`)."""
    errors: list[Diagnostic] = []
    folded = 0
    for diagnostic in diagnostics:
        if "error" in diagnostic.severity:
            errors.append(diagnostic)
            folded = 0
        elif diagnostic.severity == "note" and errors and folded < notes_per_error:
            errors[-1].context.append(f"  note: {diagnostic.message}")
            folded += 1
    return errors


def _within_budget(blocks: list[str], budget: int) -> list[int]:
    """Indices of the blocks to show: the first, then from the last backwards while they fit."""
    chosen, used = [0], len(blocks[0]) + 1
    for index in range(len(blocks) - 1, 0, -1):
        if used + len(blocks[index]) + 1 > budget:
            break
        chosen.append(index)
        used += len(blocks[index]) + 1
    return sorted(chosen)


def _tail_without_commands(log: str, budget: int) -> str:
    kept = [line for line in log.splitlines() if line.strip() and not _NOISE.match(line) and not _is_command(line)]
    loose = [line for line in kept if _LOOSE_ERROR.search(line)]
    text = "\n".join(kept)
    if loose and not any(line in text[-budget:] for line in loose):
        text = "\n".join(loose)
    return _clip_tail(text, budget)


def _is_command(line: str) -> bool:
    """A compiler command line as ninja echoes it: long, with flags."""
    return len(line) > 200 and (" -c " in line or " -o " in line) and line.count(" -") > 5


def _frame_place(match: re.Match[str]) -> str:
    path, line, function = match.group("file"), match.group("line"), match.group("function")
    if path.endswith(_CANDIDATE_FILES):
        return f"your file, line {line}, in {function}"
    return f"{_short_path(path)}, line {line}, in {function}"


def _short_path(path: str) -> str:
    """A header's path from its include root (`torch/csrc/stable/tensor.h`), a generated file's bare name."""
    for marker in ("/include/", "/site-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return path.rsplit("/", 1)[-1]


def _cap(text: str) -> str:
    return text if len(text) <= _LINE_CAP else text[:_LINE_CAP - 5] + " ..."


def _clip_tail(text: str, budget: int) -> str:
    """The text's end within the budget, from a line boundary where one is near."""
    if len(text) <= budget:
        return text
    tail = text[-(budget - 6):]
    newline = tail.find("\n")
    if 0 <= newline < len(tail) // 3:
        tail = tail[newline + 1:]
    return "(...)\n" + tail
