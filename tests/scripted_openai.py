"""A small OpenAI-compatible HTTP server with scripted faults, for tests and benchmarks (real HTTP on 127.0.0.1).

- GET  /v1/models              → the configured model ids
- POST /v1/chat/completions    → the next scripted action, else a deterministic answer from `responder`

Actions (consumed one per chat request, in order): "ok"; ("status", code, headers); ("sleep", seconds) then ok;
"malformed" (200 with a body that is not JSON); "no_choices" (200, JSON without choices); "drop" (close the
connection without answering). The default responder returns pseudo-sentences that pass validation and depend only
on (kind of prompt, user text, seed), so runs are reproducible.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

VOCAB = (
    "river market council winter engine garden signal harbor teacher museum valley station report league "
    "forest bridge captain orchard village theory painter doctor ocean mountain library festival farmer "
    "company program season island railway senate concert planet soldier"
).split()


def prompt_kind(system: str) -> str:
    s = system.lower()
    if "omitting" in s:
        return "intermediate"
    if "distinct or even contradictory" in s or "contradiction" in s:
        return "negative"
    return "positive"


def pseudo_sentence(*parts: object, words: int) -> str:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    picked = [VOCAB[b % len(VOCAB)] for b in digest[:words]]
    return " ".join(picked).capitalize() + "."


def default_responder(messages: list[dict], body: dict) -> str:
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    kind = prompt_kind(system)
    n_words = {"positive": 10, "intermediate": 5, "negative": 8}[kind]
    return pseudo_sentence(kind, user, body.get("seed"), body.get("temperature"), words=n_words)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog (5) resets connections under concurrent load


class ScriptedOpenAI:
    def __init__(self, models=("scripted-model",), responder: Callable[[list[dict], dict], str] | None = None,
                 latency_s: float = 0.0):
        self.models = list(models)
        self.responder = responder or default_responder
        self.latency_s = latency_s
        self.script: deque = deque()
        self.requests: list[dict] = []  # every chat request: {"t": monotonic, "body": …, "action": …}
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self.httpd = _Server(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> "ScriptedOpenAI":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "ScriptedOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def push(self, *actions) -> None:
        self.script.extend(actions)

    def chat_requests(self) -> list[dict]:
        with self._lock:
            return list(self.requests)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def setup(self):
                super().setup()
                # Headers and body go out as two writes: without NODELAY, Nagle + delayed ACK add ~40 ms per request.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _send(self, code: int, payload: bytes, headers: dict | None = None,
                      ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    data = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "tests"}
                                                       for m in server.models]}
                    self._send(200, json.dumps(data).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, b'{"error": {"message": "not found"}}')
                with server._lock:
                    action = server.script.popleft() if server.script else "ok"
                    server.requests.append({"t": time.monotonic(), "body": body, "action": action,
                                            "authorization": self.headers.get("Authorization")})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._act(action, body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _act(self, action, body):
                if isinstance(action, tuple) and action[0] == "status":
                    code, headers = action[1], (action[2] if len(action) > 2 else {})
                    err = {"error": {"message": f"scripted {code}", "type": "scripted", "code": code}}
                    return self._send(code, json.dumps(err).encode(), headers)
                if isinstance(action, tuple) and action[0] == "sleep":
                    time.sleep(action[1])
                if action == "malformed":
                    return self._send(200, b'{"id": "x", "choices": [ this is not json')
                if action == "no_choices":
                    return self._send(200, b'{"id": "x", "object": "chat.completion"}')
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return None
                if body.get("model") not in server.models:
                    err = {"error": {"message": f"The model `{body.get('model')}` does not exist",
                                     "type": "invalid_request_error", "code": "model_not_found"}}
                    return self._send(404, json.dumps(err).encode())
                if server.latency_s:
                    time.sleep(server.latency_s)
                text = server.responder(body.get("messages", []), body)
                prompt_tokens = sum(len(m.get("content", "").split()) for m in body.get("messages", []))
                data = {
                    "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                              "total_tokens": prompt_tokens + len(text.split())},
                }
                return self._send(200, json.dumps(data).encode())

        return Handler


def main() -> None:
    """`python -m tests.scripted_openai [port]`: serve until Ctrl-C (used by subprocess tests/benchmarks)."""
    import sys

    server = ScriptedOpenAI(latency_s=float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
    if len(sys.argv) > 1 and sys.argv[1] != "0":
        server.httpd.server_close()
        server.httpd = _Server(("127.0.0.1", int(sys.argv[1])), server._handler())
    print(server.base_url, flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
