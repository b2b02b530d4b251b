"""A real HTTP server on 127.0.0.1 that speaks enough of the OpenAI API for ChatOpenAI.

- GET  /v1/models            -> the one served model
- POST /v1/chat/completions  -> the next scripted reply, with `usage`

Script items (consumed in order by plain chat requests):
  {"content": "..."}               a 200 answer
  {"status": 429} / {"status": 500} an error answer (ChatOpenAI retries these)
  {"status": 429, "headers": {"Retry-After": "1"}}  an error answer with response headers
  {"sleep": 2.0, "content": "..."} answer after a delay (to test timeouts)
  a callable(request_json) -> one of the above
Requests asking for structured output (`response_format` json_schema, or `tools`) are answered from
`structured(request_json) -> dict` instead, as JSON content or as a tool call. When the script runs out,
`default(request_json)` answers, else HTTP 500 "script exhausted". Every request is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]


class _QuietServer(ThreadingHTTPServer):
    """Keeps handler errors (a client that gave up on a slow answer: broken pipe) out of stderr."""

    daemon_threads = True
    errors: list[str]

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        self.errors.append(repr(sys.exc_info()[1]))


class FakeOpenAIServer:
    def __init__(
        self,
        script: list[Reply | Callable[[dict[str, Any]], Reply]] | None = None,
        *,
        model: str = "fake-coder",
        structured: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        default: Callable[[dict[str, Any]], Reply] | None = None,
        api_key: str | None = None,
    ) -> None:
        self.script = list(script or [])
        self.model = model
        self.structured = structured
        self.default = default
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        """Every chat request body, in arrival order."""
        self.errors: list[str] = []
        """Errors raised while answering (e.g. writing to a client that timed out)."""
        self.statuses: list[int] = []
        """The status code of every chat answer, in order."""
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> str:
        server = _QuietServer(("127.0.0.1", 0), self._handler())
        server.errors = self.errors
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAIServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if not self._is_structured(r)]

    @staticmethod
    def _is_structured(body: dict[str, Any]) -> bool:
        return "response_format" in body or "tools" in body

    # -- answering --------------------------------------------------------------------------------------
    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._is_structured(body) and self.structured is not None:
                return {"structured": self.structured(body)}
            item = self.script.pop(0) if self.script else None
        if item is None:
            if self.default is not None:
                return self.default(body)
            return {"status": 500, "error": "script exhausted"}
        return item(body) if callable(item) else item

    def _completion(
        self, body: dict[str, Any], content: str | None, tool_call: dict[str, Any] | None
    ) -> dict[str, Any]:
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        completion = max(1, len(content or json.dumps(tool_call or {})) // 4)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        finish = "stop"
        if tool_call is not None:
            message["tool_calls"] = [
                {"id": "call_0", "type": "function", "function": tool_call},
            ]
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": max(1, prompt_chars // 4),
                "completion_tokens": completion,
                "total_tokens": max(1, prompt_chars // 4) + completion,
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if fake.api_key is None:
                    return True
                if self.headers.get("Authorization") == f"Bearer {fake.api_key}":
                    return True
                self._send(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
                return False

            def do_GET(self) -> None:
                if not self._authorized():
                    return
                if self.path.rstrip("/") == "/v1/models":
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [{"id": fake.model, "object": "model", "owned_by": "test"}],
                        },
                    )
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                if not self._authorized():
                    return
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = fake._next_reply(body)
                if reply.get("sleep"):
                    time.sleep(float(reply["sleep"]))
                status = int(reply.get("status", 200))
                with fake._lock:
                    fake.statuses.append(status)
                if status != 200:
                    self._send(
                        status,
                        {
                            "error": {
                                "message": reply.get("error", f"scripted HTTP {status}"),
                                "type": "server_error",
                            }
                        },
                        reply.get("headers"),
                    )
                    return
                if "structured" in reply:
                    data = reply["structured"]
                    if "tools" in body:
                        name = body["tools"][0]["function"]["name"]
                        self._send(
                            200, fake._completion(body, None, {"name": name, "arguments": json.dumps(data)})
                        )
                    else:
                        self._send(200, fake._completion(body, json.dumps(data), None))
                    return
                self._send(200, fake._completion(body, str(reply.get("content", "")), None))

        return Handler
