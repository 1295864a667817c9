"""A small OpenAI-compatible HTTP server with scripted faults (real HTTP on 127.0.0.1): the tests' and benchmarks' LLM,
and a dry run of a stage or a fault-injection run without a model (`python -m tasks.llm.scripted_server [port]`).

- GET  /v1/models              → the configured model ids
- GET  /props                  → llama-server's properties when `props` is set (then stage 1 sends grammars), else 404
- `n` > 1 in a chat request    → n choices, the responder asked once per choice (body["choice"] = 1, 2, … after the
  first)
- POST /v1/chat/completions    → the next scripted action, else a deterministic answer from `responder`
- POST /v1/completions         → a one-token text completion without prompt log-probs (as llama.cpp's llama-server)
- Batch API: POST /v1/files (multipart upload), GET /v1/files/{id}[/content], POST /v1/batches,
  GET /v1/batches/{id}: validating → in_progress → completed once the batch was polled `batch_polls` times; each
  line is answered by the same responder as chat completions (batch lines are not chat requests). Per-line faults:
  `batch_fail_ids` / `batch_fail_fraction` (error file), `batch_line_fault(custom_id, body)` → "error",
  ("status", code) (non-200 output line) or "missing" (no line at all); `batch_final_status` "expired" (the first
  half of the lines done, the rest in the error file) or "failed" (no output). Counters: `files_uploaded`,
  `batches_created`, `batch_retrievals`; `batch_create_errors` answers that many POST /batches with a 500;
  `batch_create_lost` creates that many batches but answers their POST with a 500 (a response lost on the way back).
  GET /v1/batches lists the batches, newest first (`after`, `limit`).

Actions (consumed one per chat request, in order): "ok"; ("status", code, headers); ("sleep", seconds) then ok;
"malformed" (200 with a body that is not JSON); "no_choices" (200, JSON without choices); "drop" (close the
connection without answering). `logprobs(messages, body)` (optional) gives the first answer token's top alternatives
[(token, logprob), …], returned when a request asks for `logprobs`. The default responder: tasks/llm/scripted_answers.py.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import itertools
import json
import socket
import threading
import time
import urllib.parse
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from tasks.llm.scripted_answers import default_responder, is_judge_request, prompt_kind  # noqa: F401 (re-exported)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog (5) resets connections under concurrent load


class ScriptedOpenAI:
    def __init__(self, models=("scripted-model",), responder: Callable[[list[dict], dict], str] | None = None,
                 latency_s: float = 0.0, batch_polls: int = 2, port: int = 0,
                 logprobs: Callable[[list[dict], dict], list[tuple[str, float]]] | None = None,
                 props: dict | None = None):
        self.models = list(models)
        self.props = props  # GET /props answer (as llama-server's); None: 404, like other servers
        self.responder = responder or default_responder
        self.logprobs = logprobs  # (messages, body) → the first answer token's top alternatives, when asked for
        self.latency_s = latency_s
        self.script: deque = deque()
        self.requests: list[dict] = []  # every chat request: {"t": monotonic, "body": …, "action": …}
        self.text_requests: list[dict] = []  # every /v1/completions body
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        # Batch API state (read at poll time, so a test may change the knobs while a batch is running).
        self.batch_polls = batch_polls
        self.batch_fail_ids: set[str] = set()
        self.batch_fail_fraction = 0.0
        self.batch_line_fault: Callable[[str, dict], object] | None = None
        self.batch_final_status = "completed"
        self.batch_create_errors = 0  # answer this many POST /batches with a 500 first
        self.batch_create_lost = 0  # create this many batches, but answer their POST with a 500
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.files_uploaded = 0
        self.batches_created = 0
        self.batch_retrievals = 0
        self.batch_lines: list[dict] = []  # every line answered inside a batch: {"custom_id", "body"}
        self.control_requests: list[dict] = []  # files/batches calls: {"method", "path", "authorization"}
        self._ids = itertools.count(1)
        self.httpd = _Server(("127.0.0.1", port), self._handler())  # a fixed port lets a restarted server reuse it
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

    def completion(self, body: dict) -> tuple[int, dict]:
        """(status, JSON body) of a chat completion for `body`: the model check, then the responder."""
        if body.get("model") not in self.models:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist",
                                   "type": "invalid_request_error", "code": "model_not_found"}}
        texts = [self.responder(body.get("messages", []), {**body, "choice": i} if i else body)
                 for i in range(max(1, int(body.get("n") or 1)))]
        text = texts[0]
        prompt_tokens = sum(len(m.get("content", "").split()) for m in body.get("messages", []))
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if body.get("logprobs") and self.logprobs is not None:
            top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in
                   self.logprobs(body.get("messages", []), body)[: body.get("top_logprobs") or 1]]
            choice["logprobs"] = {"content": [{"token": text[:1], "logprob": top[0]["logprob"] if top else 0.0,
                                               "bytes": None, "top_logprobs": top}]}
        return 200, {
            "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model"),
            "choices": [choice] + [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                                   for i, t in enumerate(texts[1:], start=1)],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": sum(len(t.split()) for t in texts),
                      "total_tokens": prompt_tokens + sum(len(t.split()) for t in texts)},
        }

    # ---- Batch API -------------------------------------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-scripted-{next(self._ids)}"

    def _store_file(self, content: bytes, filename: str, purpose: str) -> dict:
        file_id = self._new_id("file")
        obj = {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
               "filename": filename, "purpose": purpose, "status": "processed"}
        self.files[file_id] = {"object": obj, "content": content}
        return obj

    def upload(self, content: bytes, filename: str, purpose: str) -> dict:
        with self._lock:
            self.files_uploaded += 1
            return self._store_file(content, filename, purpose)

    def create_batch(self, body: dict) -> tuple[int, dict]:
        with self._lock:
            if self.batch_create_errors > 0:
                self.batch_create_errors -= 1
                return 500, {"error": {"message": "scripted 500", "type": "scripted"}}
            if body.get("input_file_id") not in self.files:
                return 400, {"error": {"message": f"No file with id {body.get('input_file_id')}", "code": "invalid"}}
            self.batches_created += 1
            batch = {"id": self._new_id("batch"), "object": "batch", "endpoint": body.get("endpoint"),
                     "errors": None, "input_file_id": body["input_file_id"],
                     "completion_window": body.get("completion_window"), "status": "validating",
                     "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                     "request_counts": {"total": 0, "completed": 0, "failed": 0},
                     "metadata": body.get("metadata"), "_polls": 0}
            self.batches[batch["id"]] = batch
            if self.batch_create_lost > 0:
                self.batch_create_lost -= 1
                return 500, {"error": {"message": "scripted 500 after the batch was created", "type": "scripted"}}
            return 200, self._public(batch)

    def list_batches(self, after: str | None, limit: int) -> dict:
        with self._lock:
            ids = list(reversed(self.batches))  # newest first, as the API lists them
            start = ids.index(after) + 1 if after in ids else 0
            page = ids[start:start + limit]
            return {"object": "list", "data": [self._public(self.batches[i]) for i in page],
                    "first_id": page[0] if page else None, "last_id": page[-1] if page else None,
                    "has_more": start + limit < len(ids)}

    def retrieve_batch(self, batch_id: str) -> dict | None:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            self.batch_retrievals += 1
            if batch["status"] in ("validating", "in_progress"):
                batch["_polls"] += 1
                if batch["_polls"] >= self.batch_polls:
                    self._finish(batch)
                else:
                    batch["status"] = "in_progress"
            return self._public(batch)

    @staticmethod
    def _public(batch: dict) -> dict:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _line_fault(self, custom_id: str, body: dict):
        if custom_id in self.batch_fail_ids:
            return "error"
        if self.batch_fail_fraction and int(hashlib.sha256(custom_id.encode()).hexdigest()[:8], 16) / 2**32 \
                < self.batch_fail_fraction:
            return "error"
        return self.batch_line_fault(custom_id, body) if self.batch_line_fault else None

    def _finish(self, batch: dict) -> None:
        """Answer every line of the input file (under the lock): output file, error file, counts, final status."""
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]]["content"].splitlines() if x.strip()]
        if self.batch_final_status == "failed":
            batch.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": [
                {"code": "scripted_failure", "message": "scripted batch failure", "line": None}]})
            batch["request_counts"] = {"total": len(lines), "completed": 0, "failed": 0}
            return
        n_done = len(lines) if self.batch_final_status == "completed" else len(lines) // 2
        out, err = [], []
        for i, line in enumerate(lines):
            custom_id, body = line["custom_id"], line.get("body", {})
            line_id = self._new_id("batch_req")
            if i >= n_done:
                err.append({"id": line_id, "custom_id": custom_id, "response": None,
                            "error": {"code": "batch_expired", "message": "This request could not be executed "
                                      "before the completion window expired."}})
                continue
            fault = self._line_fault(custom_id, body)
            if fault == "missing":
                continue
            if fault == "error":
                err.append({"id": line_id, "custom_id": custom_id, "response": None,
                            "error": {"code": "scripted_line_error", "message": f"scripted failure of {custom_id}"}})
                continue
            if isinstance(fault, tuple) and fault[0] == "status":
                code, data = fault[1], {"error": {"message": f"scripted {fault[1]}", "type": "scripted"}}
            else:
                code, data = self.completion(body)
                self.batch_lines.append({"custom_id": custom_id, "body": body})
            out.append({"id": line_id, "custom_id": custom_id, "error": None,
                        "response": {"status_code": code, "request_id": line_id, "body": data}})
        for name, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                content = "".join(json.dumps(r) + "\n" for r in rows).encode()
                batch[name] = self._store_file(content, f"{batch['id']}_{name[:-8]}.jsonl", "batch_output")["id"]
        batch["status"] = self.batch_final_status
        batch[f"{self.batch_final_status}_at"] = int(time.time())
        ok = sum(r["response"]["status_code"] == 200 for r in out)
        batch["request_counts"] = {"total": len(lines), "completed": ok, "failed": len(lines) - ok}

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
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout, a killed run): expected in the fault tests, not an error

            def do_GET(self):
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/models"):
                    data = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "tests"}
                                                       for m in server.models]}
                    self._send(200, json.dumps(data).encode())
                elif path == "/props" and server.props is not None:
                    self._send(200, json.dumps(server.props).encode())
                elif path.endswith("/batches"):
                    self._control("GET", path)
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                    page = server.list_batches(query.get("after", [None])[0], int(query.get("limit", ["20"])[0]))
                    self._send(200, json.dumps(page).encode())
                elif "/files/" in path or "/batches/" in path:
                    self._batch_get(path)
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def _control(self, method: str, path: str) -> None:
                with server._lock:
                    server.control_requests.append({"method": method, "path": path,
                                                    "authorization": self.headers.get("Authorization")})

            def _batch_get(self, path: str) -> None:
                self._control("GET", path)
                parts = path.split("/")
                if parts[-1] == "content" and parts[-3] == "files":
                    stored = server.files.get(parts[-2])
                    if stored is None:
                        return self._send(404, b'{"error": {"message": "no such file"}}')
                    return self._send(200, stored["content"], ctype="application/octet-stream")
                if parts[-2] == "files" and parts[-1] in server.files:
                    return self._send(200, json.dumps(server.files[parts[-1]]["object"]).encode())
                if parts[-2] == "batches":
                    batch = server.retrieve_batch(parts[-1])
                    if batch is not None:
                        return self._send(200, json.dumps(batch).encode())
                return self._send(404, b'{"error": {"message": "not found"}}')

            def _upload(self, raw: bytes) -> None:
                ctype = self.headers.get("Content-Type", "")
                msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                    b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw)
                fields = {part.get_param("name", header="content-disposition"): part for part in msg.iter_parts()}
                if "file" not in fields or "purpose" not in fields:
                    return self._send(400, b'{"error": {"message": "file and purpose are required"}}')
                obj = server.upload(fields["file"].get_payload(decode=True), fields["file"].get_filename() or "upload",
                                    fields["purpose"].get_payload(decode=True).decode())
                return self._send(200, json.dumps(obj).encode())

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/files"):
                    self._control("POST", path)
                    return self._upload(raw)
                if path.endswith("/batches"):
                    self._control("POST", path)
                    code, data = server.create_batch(json.loads(raw or b"{}"))
                    return self._send(code, json.dumps(data).encode())
                body = json.loads(raw or b"{}")
                if path.endswith("/v1/completions"):
                    # Text completions answered like llama.cpp's llama-server: no prompt log-probs echoed.
                    with server._lock:
                        server.text_requests.append(body)
                    return self._send(200, json.dumps({
                        "id": "cmpl-scripted", "object": "text_completion", "created": int(time.time()),
                        "model": body.get("model"), "choices": [{"index": 0, "text": " the", "logprobs": None,
                                                                 "finish_reason": "length"}],
                        "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}}).encode())
                if not path.endswith("/chat/completions"):
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
                if body.get("model") in server.models and server.latency_s:
                    time.sleep(server.latency_s)
                code, data = server.completion(body)
                return self._send(code, json.dumps(data).encode())

        return Handler


def main() -> None:
    """`python -m tasks.llm.scripted_server [port]`: serve until Ctrl-C (used by subprocess tests/benchmarks)."""
    import sys

    server = ScriptedOpenAI(latency_s=float(sys.argv[2]) if len(sys.argv) > 2 else 0.0,
                            port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(server.base_url, flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
