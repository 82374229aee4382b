"""A real HTTP server on 127.0.0.1 speaking the Chat Completions protocol, scripted per request."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    """Each POST takes the next step: ("ok", content) | ("reply", {"content", "finish_reason", "completion_tokens"})
    (a recorded reply, as the model's server sent it) | ("status", code) | ("sleep", seconds) | ("garbage", text)."""

    def __init__(self, steps: list[tuple[str, Any]]) -> None:
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body,
                                        "authorization": self.headers.get("Authorization")})
                kind, value = server.steps.pop(0) if server.steps else ("status", 500)
                if kind == "sleep":
                    time.sleep(value)
                    kind, value = "ok", "late"
                if kind == "status":
                    self._send(value, {"error": {"message": f"scripted {value}", "type": "test"}},
                               {"retry-after": "0"})
                elif kind == "garbage":
                    self._send_raw(200, value.encode())
                elif kind == "reply":
                    self._send(200, _completion(body["model"], value["content"], value.get("finish_reason", "stop"),
                                                value.get("completion_tokens", 80)))
                else:
                    self._send(200, _completion(body["model"], value))

            def _send(self, code: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._send_raw(code, json.dumps(payload).encode(), headers)

            def _send_raw(self, code: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _completion(model: str, content: str, finish_reason: str = "stop", completion_tokens: int = 80) -> dict[str, Any]:
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": completion_tokens,
                      "total_tokens": 120 + completion_tokens,
                      "completion_tokens_details": {"reasoning_tokens": 30}}}
