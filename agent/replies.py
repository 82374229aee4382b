"""Nothing a model writes is wasted: what a coder's reply holds, and what to ask once more when it holds no file.
A reply cut off at the token cap, a lone C++ op, an echo of the prompt and a reply without code each get one
specific re-ask (the loop sends it); a complete light-form op without its Python file is wrapped by the harness."""

from __future__ import annotations

from dataclasses import dataclass

from agent.llm import Message
from agent.parse import ParseError, extract_candidate
from agent.wrapper import WrapError, cpp_op, wrap_op
from kernelbench.problem import Problem

_FILE = "the whole file in one ```python code block that defines class ModelNew"
_OP = "the whole C++ source of the op in one ```cpp code block"
_ECHO = 0.5  # the share of a reply's lines copied from its prompt that makes it an echo


@dataclass(frozen=True)
class Reading:
    """What one reply gave: a file to evaluate, or why not and what to ask next."""

    source: str | None = None
    reason: str = ""  # why there is no file (the attempt's reason when the re-ask gives none either)
    reask: str | None = None  # the one message that asks again
    fallback: str | None = None  # a complete file the reply held before it was cut off: used if the re-ask fails
    note: str | None = None  # what the harness did with the reply (wrapped a lone op), for the transcript


def truncated(finish_reason: str | None) -> bool:
    return finish_reason == "length"


def read_reply(reply: str, finish_reason: str | None, tokens: int | None, problem: Problem, device: str,
               prompt: str, contract: str = "file") -> Reading:
    """The file in `reply` (or the file the harness writes around its op); else the reason there is none and the
    re-ask that names it (`contract` "kernel": the re-ask asks for the op)."""
    want = _OP if contract == "kernel" else _FILE
    try:
        found: str | None = extract_candidate(reply)
    except ParseError:
        found = None
    if truncated(finish_reason):
        cap = f"{tokens} tokens" if tokens else "the token cap"
        return Reading(reason=f"the reply was cut off at {cap} (finish_reason length)", fallback=found,
                       reask=f"Your reply was cut off at {cap}, before it ended. Send only the code: {want}, "
                             "with no explanation before or after it.")
    if found is not None:
        return Reading(source=found)
    op = cpp_op(reply)
    if op is not None:
        try:
            return Reading(source=wrap_op(problem, op, device), note="the reply held a complete C++ op and no "
                           "Python file: the harness wrote the ModelNew around it from the problem's signature")
        except WrapError as exc:
            return Reading(reason=f"the reply held a C++ op but no Python file ({exc})",
                           reask=f"Your reply has the C++ op but no Python file, and the harness cannot wire the op "
                                 f"to the problem: {exc}. Reply with {want}.")
    if _echo(reply, prompt):
        return Reading(reason="the reply repeated the prompt and held no code",
                       reask=f"Your reply repeated the end of the prompt instead of answering it. Reply with "
                             f"{want}.")
    return Reading(reason="the reply has no complete ```python code block defining `class ModelNew`" +
                   (" nor a complete C++ op" if contract == "kernel" else ""),
                   reask=f"Your reply held no complete code block with the code asked for. Reply with {want}.")


def _echo(reply: str, prompt: str) -> bool:
    lines = [line.strip() for line in reply.splitlines() if len(line.strip()) > 12]
    return bool(lines) and sum(line in prompt for line in lines) / len(lines) >= _ECHO


def reask_messages(asked: list[Message], reply: str, reask: str, limit: int = 3000) -> list[Message]:
    """The conversation once more: the reply (its end, where a long one went wrong) and the one thing to fix."""
    shown = reply if len(reply) <= limit else "..." + reply[-limit:]
    return [*asked, {"role": "assistant", "content": shown}, {"role": "user", "content": reask}]


def same_file_reask(error: str) -> str:
    """For a repair that sent back the file it was asked to fix."""
    return (f"This is the same file you sent before; it failed with: {error}. Change what the error requires and "
            f"reply with {_FILE}.")
