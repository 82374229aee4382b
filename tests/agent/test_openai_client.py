"""The OpenAI SDK client against a real local HTTP server: success, retries, timeout, malformed replies."""

from __future__ import annotations

import pytest

from agent.llm import EndpointUnreachable, LLMError
from agent.openai_client import ConfigError, OpenAIChatModel, OpenAIConfig
from agent.parse import parse_judge
from agent.pricing import PriceTable
from tests.agent.fake_server import ScriptedServer

MESSAGES = [{"role": "user", "content": "hello"}]


def _model(url: str, **overrides: object) -> tuple[OpenAIChatModel, list[float]]:
    waits: list[float] = []
    config = OpenAIConfig(model="gpt-4o-mini", base_url=url, backoff_s=0.01, **overrides)
    return OpenAIChatModel(config, PriceTable(), sleep=waits.append), waits


def test_success_reports_usage_reasoning_tokens_and_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ScriptedServer([("ok", "the answer")]) as server:
        model, _ = _model(server.url, temperature=0.2)
        reply = model.complete(MESSAGES, purpose="coder", max_tokens=500)
    assert reply.content == "the answer" and reply.finish_reason == "stop"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.reasoning_tokens) == (120, 80, 30)
    assert reply.cost_usd == pytest.approx((120 * 0.15 + 80 * 0.60) / 1e6)
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["authorization"] == "Bearer sk-test"
    assert sent["body"]["temperature"] == 0.2 and sent["body"]["max_completion_tokens"] == 500


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retries_after_rate_limits_and_server_errors(status: int) -> None:
    with ScriptedServer([("status", status), ("status", status), ("ok", "finally")]) as server:
        model, waits = _model(server.url)
        assert model.complete(MESSAGES, purpose="judge").content == "finally"
    assert len(server.requests) == 3 and len(waits) == 2


def test_client_errors_are_not_retried() -> None:
    with ScriptedServer([("status", 400), ("ok", "never")]) as server:
        model, _ = _model(server.url)
        with pytest.raises(LLMError, match="refused the request .*400"):
            model.complete(MESSAGES, purpose="coder")
    assert len(server.requests) == 1


def test_timeout_is_retried_then_reported() -> None:
    """A hosted endpoint (retry_timeouts stands in for a remote host: the test server is on loopback)."""
    with ScriptedServer([("sleep", 2.0), ("sleep", 2.0)]) as server:
        model, waits = _model(server.url, timeout_s=0.3, max_retries=1, retry_timeouts=True)
        with pytest.raises(LLMError, match="failed after 2 attempts"):
            model.complete(MESSAGES, purpose="coder")
    assert len(waits) == 1


def test_a_timeout_against_a_local_server_is_not_retried_into_it() -> None:
    """A local server still generates for the abandoned request: a retry would queue behind it."""
    with ScriptedServer([("sleep", 2.0), ("ok", "never asked")]) as server:
        model, waits = _model(server.url, timeout_s=0.3, max_retries=3)
        with pytest.raises(LLMError, match="not retried.*--llm-timeout"):
            model.complete(MESSAGES, purpose="coder")
    assert len(server.requests) == 1 and not waits


def test_a_deadline_bounds_the_call_in_flight_and_the_next_is_not_made() -> None:
    import time

    with ScriptedServer([("sleep", 3.0), ("ok", "never asked")]) as server:
        model, _ = _model(server.url, timeout_s=60.0, retry_timeouts=True)
        model.set_deadline(time.monotonic() + 1.2)
        started = time.monotonic()
        with pytest.raises(LLMError, match="time limit"):
            model.complete(MESSAGES, purpose="coder")
        assert time.monotonic() - started < 2.5
        with pytest.raises(LLMError, match="time limit is reached"):
            model.complete(MESSAGES, purpose="coder")
    assert len(server.requests) == 1


def test_the_reply_cap_of_the_model_options_is_sent() -> None:
    with ScriptedServer([("ok", "short")]) as server:
        model, _ = _model(server.url, reply_tokens=256)
        model.complete(MESSAGES, purpose="coder")
    assert server.requests[0]["body"]["max_completion_tokens"] == 256


def test_malformed_reply_is_an_llm_error() -> None:
    with ScriptedServer([("garbage", "{not json")]) as server:
        model, _ = _model(server.url, max_retries=0)
        with pytest.raises(LLMError):
            model.complete(MESSAGES, purpose="coder")


def test_judge_reply_that_is_not_json_still_steers() -> None:
    with ScriptedServer([("ok", "Diagnosis: uncoalesced loads\nChange: tile through shared memory")]) as server:
        model, _ = _model(server.url)
        advice = parse_judge(model.complete(MESSAGES, purpose="judge").content)
    assert advice.diagnosis == "uncoalesced loads" and advice.change == "tile through shared memory"


def test_no_key_and_no_endpoint_is_a_helpful_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY.*--base-url"):
        OpenAIChatModel(OpenAIConfig(model="gpt-4o"))


def test_refused_connection_fails_at_once_without_retries() -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model, waits = _model(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(EndpointUnreachable, match="cannot reach .*is the server running"):
        model.complete(MESSAGES, purpose="coder")
    assert waits == []
