"""The chat-model protocol every LLM client implements, and what a call returns."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0  # included in completion_tokens when the server reports it


class LLMReply(BaseModel):
    content: str
    model: str
    usage: Usage = Usage()
    cost_usd: float = 0.0
    latency_s: float = 0.0
    finish_reason: str | None = None


class LLMError(RuntimeError):
    """A call that failed for good (after retries): the attempt is recorded as failed, the run goes on."""


class EndpointUnreachable(LLMError):
    """The endpoint refused the connection or its name does not resolve: retrying will not help, so the run
    stops instead of waiting out every call's retries."""


class ChatModel(Protocol):
    """One chat completion. `purpose` ("coder" or "judge") lets a scripted model pick its reply."""

    name: str

    def complete(self, messages: list[Message], *, purpose: str, max_tokens: int | None = None) -> LLMReply:
        ...
