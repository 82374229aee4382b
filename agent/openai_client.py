"""Chat Completions over the OpenAI SDK: any OpenAI-compatible server (OpenAI, vLLM, SGLang, Ollama)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlparse

from agent.llm import EndpointUnreachable, LLMError, LLMReply, Message, Usage
from agent.pricing import PriceTable

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


class ConfigError(ValueError):
    """No usable endpoint or key: the message names the options and environment variables."""


@dataclass
class OpenAIConfig:
    """How to reach the model."""

    model: str
    base_url: str | None = None  # None: api.openai.com; or e.g. http://localhost:8000/v1 for vLLM
    api_key_env: str = "OPENAI_API_KEY"  # the *name* of the variable holding the key, never the key
    temperature: float | None = None
    reasoning_effort: str | None = None  # "low" | "medium" | "high" for reasoning models
    timeout_s: float = 600.0
    max_retries: int = 4
    backoff_s: float = 2.0
    reply_tokens: int | None = None  # the cap on a reply when the caller gives none
    retry_timeouts: bool | None = None  # None: retried unless the endpoint is on this machine (local_endpoint)


_LOOPBACK = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def local_endpoint(base_url: str | None) -> bool:
    """A server on this machine: one that, asked again after a timeout, queues the retry behind the generation it
    is still running for the abandoned request."""
    host = urlparse(base_url).hostname if base_url else None
    return bool(host) and (host in _LOOPBACK or host.startswith("127."))


def missing_configuration_message(config: OpenAIConfig) -> str:
    return (f"no LLM endpoint configured: set {config.api_key_env} (or --api-key-env NAME) to use api.openai.com, "
            "or --base-url URL (and --model NAME) for an OpenAI-compatible server such as vLLM, SGLang or Ollama; "
            "--model scripted:FILE replays replies from a file offline")


class OpenAIChatModel:
    def __init__(self, config: OpenAIConfig, prices: PriceTable | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        from openai import OpenAI

        key = os.environ.get(config.api_key_env)
        if not key and not config.base_url:
            raise ConfigError(missing_configuration_message(config))
        self.config = config
        self.name = config.model
        self.prices = prices or PriceTable()
        self.sleep = sleep
        self.timeout_s = config.timeout_s
        self.deadline: float | None = None  # time.monotonic() after which no call starts or runs on (--time-limit)
        # the SDK's own retries are off: ours are counted, logged and testable
        self.client = OpenAI(api_key=key or "not-needed", base_url=config.base_url, timeout=config.timeout_s,
                             max_retries=0)

    def _options(self, max_tokens: int | None) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.config.temperature is not None:
            options["temperature"] = self.config.temperature
        if self.config.reasoning_effort:
            options["reasoning_effort"] = self.config.reasoning_effort
        if max_tokens or self.config.reply_tokens:
            options["max_completion_tokens"] = max_tokens or self.config.reply_tokens
        return options

    def set_deadline(self, deadline: float | None) -> None:
        """No call runs past `deadline` (time.monotonic()): each call's timeout is cut to the time left."""
        self.deadline = deadline

    def _timeout(self) -> float:
        if self.deadline is None:
            return self.config.timeout_s
        left = self.deadline - time.monotonic()
        if left < 1.0:
            raise LLMError(f"{self.name}: not called, the run's time limit is reached")
        return min(self.config.timeout_s, left)

    def complete(self, messages: list[Message], *, purpose: str, max_tokens: int | None = None) -> LLMReply:
        import openai

        last_error = ""
        for attempt in range(self.config.max_retries + 1):
            started = time.perf_counter()
            timeout = self._timeout()
            try:
                response = self.client.chat.completions.create(model=self.config.model, messages=messages,
                                                               timeout=timeout, **self._options(max_tokens))
                return self._reply(response, time.perf_counter() - started)
            except openai.APIStatusError as exc:
                last_error = f"HTTP {exc.status_code}: {_message(exc)}"
                if exc.status_code not in RETRYABLE_STATUS:
                    raise LLMError(f"{self.name} refused the request ({last_error})") from None
                delay = _retry_after(exc) or self.config.backoff_s * 2 ** attempt
            except openai.APITimeoutError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                if timeout < self.config.timeout_s:
                    raise LLMError(f"{self.name}: stopped after {timeout:.0f} s by the run's time limit") from None
                retry = self.config.retry_timeouts
                if not (retry if retry is not None else not local_endpoint(self.config.base_url)):
                    raise LLMError(f"{self.name} timed out after {timeout:.0f} s; not retried, since a local server "
                                   "keeps generating for the abandoned request and would queue the retry behind "
                                   "it: give a slow model more time with --llm-timeout SECONDS") from None
                delay = self.config.backoff_s * 2 ** attempt
            except openai.APIConnectionError as exc:
                if _unreachable(exc):
                    raise EndpointUnreachable(f"{self.name}: cannot reach {self.client.base_url} "
                                              f"({_root_cause(exc)}); is the server running and --base-url right?"
                                              ) from None
                last_error = f"{type(exc).__name__}: {_root_cause(exc)}"
                delay = self.config.backoff_s * 2 ** attempt
            except (openai.OpenAIError, ValueError, TypeError, AttributeError) as exc:  # a reply it could not parse
                raise LLMError(f"{self.name} sent a malformed reply: {exc}") from None
            if attempt < self.config.max_retries:
                self.sleep(min(delay, 60.0))
        raise LLMError(f"{self.name} failed after {self.config.max_retries + 1} attempts: {last_error}")

    def _reply(self, response: Any, latency_s: float) -> LLMReply:
        choices = getattr(response, "choices", None)
        if not choices:
            raise LLMError(f"{self.name} sent a reply without choices")
        message = choices[0].message
        content = message.content if message is not None else None
        if content is None:
            refusal = getattr(message, "refusal", None)
            raise LLMError(f"{self.name} returned no content" + (f" (refusal: {refusal})" if refusal else ""))
        usage = _usage(getattr(response, "usage", None))
        model = getattr(response, "model", None) or self.name
        return LLMReply(content=content, model=model, usage=usage, cost_usd=self.prices.cost(self.name, usage),
                        latency_s=latency_s, finish_reason=choices[0].finish_reason)


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return f"{type(exc).__name__}: {exc}"


def _unreachable(exc: BaseException) -> bool:
    """Connection refused or an unknown host (the HTTP library's ConnectError, matched by name: the SDK's
    transport package has been renamed before): nothing listens there. A reset or a dropped connection
    mid-reply is worth retrying; these are not."""
    cause = exc.__cause__
    while cause is not None:
        if type(cause).__name__ == "ConnectError":
            return True
        cause = cause.__cause__
    return False


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    details = getattr(raw, "completion_tokens_details", None)
    return Usage(prompt_tokens=raw.prompt_tokens or 0, completion_tokens=raw.completion_tokens or 0,
                 reasoning_tokens=(getattr(details, "reasoning_tokens", 0) or 0) if details else 0)


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        return str(error.get("message", error) if isinstance(error, dict) else error)[:300]
    return str(getattr(exc, "message", exc))[:300]


def _retry_after(exc: Any) -> float | None:
    try:
        return float(exc.response.headers.get("retry-after"))
    except (AttributeError, TypeError, ValueError):
        return None
