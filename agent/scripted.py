"""A deterministic chat model for tests and offline demos: replies come from a JSON file.

    {"replies": [{"purpose": "coder", "problem": "Max_reduction", "content": "..."},
                 {"purpose": "judge", "content": "{\"diagnosis\": ..., \"change\": ...}"}]}

Each call takes the first unused reply with the call's purpose whose `problem` (optional) appears in the last
user message: in order, or matched to the problem. A repair call (purpose `repair1`, `repair2`, ...: a direct fix
after a failed build or run) takes the first unused `repair` reply, else the next `coder` reply, so a script
written as a model's sequence of files needs no repair entries; a re-ask (`coder+`, `repair1+same`) takes the
next reply of its kind. A reply may carry `finish_reason` ("length": cut off at the cap).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from agent.llm import LLMError, LLMReply, Message, Usage

BUNDLED_SCRIPTS = Path(__file__).parent / "scripts"
_PURPOSES = ("coder", "judge", "repair")


class ScriptedModel:
    def __init__(self, path: Path) -> None:
        if not path.exists() and (BUNDLED_SCRIPTS / path.name).exists():
            path = BUNDLED_SCRIPTS / path.name
        try:
            data = json.loads(path.read_text())
            self.replies = [dict(r) for r in data["replies"]]
            assert all(isinstance(r["content"], str) and r.get("purpose") in _PURPOSES for r in self.replies)
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
            raise ValueError(f"{path}: not a script of replies ({exc}); expected "
                             '{"replies": [{"purpose": "coder"|"judge"|"repair", "content": "...", '
                             '"problem": "optional"}]}')
        self.used = [False] * len(self.replies)
        self.name = "scripted"
        self.sequential = True  # replies are matched in call order: the loop asks one call at a time
        self.lock = threading.Lock()  # a sweep's problems may still call from several threads

    def _take(self, messages: list[Message], purpose: str) -> dict[str, str] | None:
        with self.lock:
            return self._first_unused(messages, purpose)

    def _first_unused(self, messages: list[Message], purpose: str) -> dict[str, str] | None:
        purpose = purpose.split("+")[0]  # a re-ask ("coder+", "repair1+same") takes the next reply of its kind
        if purpose.startswith("repair"):
            return self._first_of(messages, "repair") or self._first_of(messages, "coder")
        return self._first_of(messages, purpose)

    def _first_of(self, messages: list[Message], purpose: str) -> dict[str, str] | None:
        prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        for index, reply in enumerate(self.replies):
            if self.used[index] or reply["purpose"] != purpose:
                continue
            if reply.get("problem") and reply["problem"] not in prompt:
                continue
            self.used[index] = True
            return reply
        return None

    def complete(self, messages: list[Message], *, purpose: str, max_tokens: int | None = None) -> LLMReply:
        reply = self._take(messages, purpose)
        if reply is None:
            raise LLMError(f"the script has no {purpose} reply left for this prompt")
        usage = Usage(prompt_tokens=sum(len(m["content"]) for m in messages) // 4,
                      completion_tokens=len(reply["content"]) // 4)
        return LLMReply(content=reply["content"], model="scripted", usage=usage,
                        finish_reason=reply.get("finish_reason", "stop"))

    def replayed(self, messages: list[Message], purpose: str) -> None:
        """A resumed run replayed this call from the store: the script moves past the reply it was given."""
        self._take(messages, purpose)
