"""Robust parsing of model replies: the coder's kernel file and the judge's JSON advice."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


class ParseError(ValueError):
    """The reply has no usable content; the message says what was missing (it goes back to the model)."""


def _defines_model_new(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "class ModelNew" in code  # let the harness report the syntax error precisely
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def extract_candidate(reply: str) -> str:
    """The last complete fenced code block that defines `ModelNew` (a reply may show drafts first)."""
    blocks = [body for language, body in _FENCE.findall(reply) if language.lower() in ("", "python", "py")]
    for body in reversed(blocks):
        if _defines_model_new(body):
            return body.strip() + "\n"
    if "```" not in reply and _defines_model_new(reply):  # a bare file without fences (not a cut-off block)
        return reply.strip() + "\n"
    raise ParseError("the reply has no complete ```python code block defining `class ModelNew`")


class JudgeAdvice(BaseModel):
    """The judge's answer: one diagnosis, one change."""

    diagnosis: str
    change: str
    expected_effect: str = ""


@dataclass(frozen=True)
class UnusableAdvice:
    """The judge answered twice without the JSON asked for: the coder is told it has no advice, and the report
    says why."""

    reason: str


def _json_objects(text: str) -> list[str]:
    """Balanced {...} spans, outermost first, scanning strings correctly."""
    spans, depth, start, in_string, escaped = [], 0, -1, False, False
    for index, char in enumerate(text):
        if in_string:
            escaped = (char == "\\") and not escaped
            if char == '"' and not escaped:
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start:index + 1])
    return spans


def parse_judge(reply: str) -> JudgeAdvice:
    """JSON (bare, fenced, or embedded in prose) with `diagnosis` and `change`; failing that, `Diagnosis:` and
    `Change:` lines. Anything else (prose, code, a list, other keys, nothing) is a ParseError that says what was
    wrong: the loop asks once more, and never passes raw text on as the change."""
    for candidate in [b for _, b in _FENCE.findall(reply)] + _json_objects(reply):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            try:
                return JudgeAdvice.model_validate({k.lower(): v for k, v in data.items()})
            except ValidationError:
                continue
    diagnosis = re.search(r"diagnosis\s*[:\-]\s*(.+)", reply, re.IGNORECASE)
    change = re.search(r"change\s*[:\-]\s*(.+)", reply, re.IGNORECASE)
    if diagnosis and change:
        return JudgeAdvice(diagnosis=diagnosis.group(1).strip(), change=change.group(1).strip())
    if not reply.strip():
        raise ParseError("the reply is empty")
    raise ParseError("the reply has no JSON object with string fields `diagnosis` and `change`")
