"""Chat completions through the OpenAI Batch API: one JSONL file per round, results mapped back by request key.

Why a second path: a batch costs about half of the same direct calls and has its own, much larger rate limits, at
the price of latency (minutes to 24 h). What keeps it interchangeable with `LLMClient.complete`:
- each line's `custom_id` is the content-addressed key of the response cache (`request_key`), so results map back
  deterministically and successful ones go into the same cache: a re-run (either path) pays nothing for them;
- before the batch is created, the round's state (input file id, then batch id, request keys; never the API key) is
  written atomically to `<state_dir>/batch-<hash of the round's keys>.json`: a process that dies while polling
  re-attaches to the same batch on the next run instead of paying for it twice. The file goes once results are in;
- a batch is never created twice for one uploaded file: when the create call's answer is lost (timeout, 5xx, a crash
  before the id was stored), the endpoint's batch list is searched for a batch of that input file first;
- every request that does not come back as a 200 (error-file line, non-200 line, missing line, failed or expired
  batch) is a `CallResult(ok=False, error=…)`, counted in the client's stats, never dropped. An expired batch's
  completed lines are used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import openai

from tasks.core.config import ConfigError, LLMSettings, stsgen_home
from tasks.core.store import atomic_write_bytes
from tasks.llm.cache import request_key
from tasks.llm.client import CallResult, LLMClient, request_params
from tasks.llm.endpoint import api_key, redact

ENDPOINT = "/v1/chat/completions"
TERMINAL = {"completed", "failed", "expired", "cancelled"}
MAX_BATCH_LINES = 50_000  # the Batch API's limit per input file
STATE_VERSION = 1

log = logging.getLogger(__name__)

Request = tuple[list[dict[str, str]], dict[str, Any]]


class BatchPending(RuntimeError):
    """Polling stopped (`max_polls`) before the batch reached a terminal status; its state file stays, so the next
    run re-attaches to it."""


@dataclass
class BatchStats:
    batches_created: int = 0
    batches_reattached: int = 0
    files_uploaded: int = 0
    batch_lines: int = 0  # requests submitted in batches
    batch_lines_failed: int = 0


def batch_line(key: str, model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
    """One JSONL request line; the body holds exactly what the direct call sends (model, messages, params)."""
    return {"custom_id": key, "method": "POST", "url": ENDPOINT,
            "body": {"model": model, "messages": messages, **params}}


def to_jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines).encode("utf-8")


def round_id(keys: list[str]) -> str:
    """Identity of a round: the set of its request keys (order and duplicates do not matter)."""
    return hashlib.sha256("\n".join(sorted(set(keys))).encode()).hexdigest()


def default_state_dir(settings: LLMSettings) -> Path:
    # Beside the response cache: the state is as content-addressed as the cache, and lives as long.
    cache = settings.resolved_cache_path()
    return (cache.parent if cache is not None else stsgen_home()) / "llm-batches"


def read_state(path: Path) -> dict[str, Any] | None:
    """The stored round state, or None when absent or unreadable (a torn file cannot happen: writes are atomic)."""
    try:
        state = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("version") == STATE_VERSION else None


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write atomically: a reader sees the old or the new state, never a torn one."""
    atomic_write_bytes(path, json.dumps(state, indent=1, sort_keys=True).encode())


def parse_lines(text: str) -> tuple[dict[str, dict[str, Any]], int]:
    """Result lines by custom_id, and the number of lines that were not JSON objects with a custom_id."""
    by_id: dict[str, dict[str, Any]] = {}
    bad = 0
    for raw in text.splitlines():
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            by_id[str(line["custom_id"])] = line
        except (ValueError, KeyError, TypeError):
            bad += 1
    return by_id, bad


def line_outcome(line: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(cacheable result, None, None) for a 200 line with a usable completion, else (None, error kind, message)."""
    error = line.get("error")
    response = line.get("response") or {}
    code = response.get("status_code")
    body = response.get("body") or {}
    if error:
        return None, "batch_line_error", f"batch line error {error.get('code')}: {error.get('message')}"
    if code != 200:
        message = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
        return None, f"http_{code}", f"http_{code}: {message or 'no message'}"
    try:
        choice = body["choices"][0]
        usage = body.get("usage") or {}
        choices = body["choices"]
        return {
            "text": choice["message"].get("content") or "",
            "texts": [c["message"].get("content") or "" for c in choices] if len(choices) > 1 else None,
            "finish_reason": choice.get("finish_reason"),
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "latency_s": 0.0,  # a batch line has no per-request latency
        }, None, None
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        return None, "malformed", f"malformed response: {type(exc).__name__}: {str(exc)[:200]}"


def find_batch(client: openai.OpenAI, input_file_id: str, scan: int = 1000) -> Any | None:
    """A usable batch (not failed or cancelled) made from `input_file_id`, among the endpoint's `scan` newest."""
    try:
        for i, batch in enumerate(client.batches.list(limit=100)):  # newest first; the iterator follows cursors
            if i >= scan:
                break
            if batch.input_file_id == input_file_id and batch.status not in ("failed", "cancelling", "cancelled"):
                return batch
    except openai.NotFoundError:  # an endpoint without the list call: nothing to find
        pass
    return None


def _batch_errors(batch: Any) -> str:
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    return "; ".join(f"{e.code}: {e.message}" for e in errors[:3])


class BatchRunner:
    """Runs rounds of requests as Batch API batches for one `LLMClient` (its settings, cache and stats).

    `run(requests)` blocks until the round's batch is terminal and returns one `CallResult` per request, in order;
    `max_polls` (tests) raises `BatchPending` after that many status polls instead of waiting on."""

    def __init__(self, client: LLMClient, *, poll_s: float = 5.0, state_dir: Path | None = None,
                 max_polls: int | None = None, sleep: Callable[[float], None] = time.sleep):
        self.llm = client
        self.poll_s = poll_s  # stage 1's batch_poll_s
        self.settings = client.settings
        self.state_dir = Path(state_dir) if state_dir else default_state_dir(client.settings)
        self.max_polls = max_polls
        self.sleep = sleep
        self.stats = BatchStats()

    def _openai(self) -> openai.OpenAI:
        # Few control calls per round: the client's own retries (backoff, Retry-After) are enough here.
        return openai.OpenAI(base_url=self.settings.base_url, api_key=api_key(self.settings),
                             max_retries=self.settings.max_retries, timeout=self.settings.timeout_s)

    def state_path(self, keys: list[str]) -> Path:
        return self.state_dir / f"batch-{round_id(keys)[:32]}.json"

    def run(self, requests: list[Request]) -> list[CallResult]:
        model = self.settings.model
        # The Batch API takes no grammar: allowed answers are parsed from the free answer.
        requests = [(m, request_params(p, grammar=False)) for m, p in requests]
        keys = [request_key(model, m, p) for m, p in requests]
        results: dict[str, CallResult] = {}
        pending: dict[str, Request] = {}
        for key, request in zip(keys, requests):
            if key in results or key in pending:
                continue
            hit = self.llm.cache.get(key) if self.llm.cache is not None else None
            if hit is not None:
                self.llm.count_cache_hit(hit)
                results[key] = CallResult(ok=True, cached=True, key=key, **hit)
            else:
                pending[key] = request
        state_path = self.state_path(keys)
        collected = True
        if pending:
            round_results, collected = self._round(pending, state_path)
            results.update(round_results)
        if collected:  # results are in (or all cached after a crash past collection): the state has served
            state_path.unlink(missing_ok=True)
        return [results[k] for k in keys]

    def _round(self, pending: dict[str, Request], state_path: Path) -> tuple[dict[str, CallResult], bool]:
        """(results, whether a batch was collected); a failed submission keeps the state, so the next run reuses
        a file that was uploaded."""
        with self._openai() as client:
            state = read_state(state_path)
            batch = None
            if state and state.get("batch_id") and set(pending) <= set(state.get("keys", ())):
                try:
                    batch = client.batches.retrieve(state["batch_id"])
                    self.stats.batches_reattached += 1
                    log.info("re-attached to batch %s (%s)", batch.id, batch.status)
                except openai.NotFoundError:
                    log.warning("stored batch %s is unknown to the endpoint: submitting anew", state["batch_id"])
                    state = None
            if batch is None:
                try:
                    batch = self._submit(client, pending, state, state_path)
                except openai.NotFoundError:
                    raise ConfigError(
                        f"LLM endpoint {self.settings.base_url} does not serve the Batch API (/files, /batches); "
                        "run without --batch-api / batch_api."
                    ) from None
                except openai.OpenAIError as exc:  # the whole round failed to start: every request is a failure
                    return {k: self._fail(k, "batch_submit", f"batch submission failed: {exc}") for k in pending}, \
                        False
            batch = self._wait(client, batch)
            return self._collect(client, batch, pending), True

    def _submit(self, client: openai.OpenAI, pending: dict[str, Request], state: dict | None,
                state_path: Path) -> Any:
        keys = sorted(pending)
        if state and state.get("input_file_id") and sorted(state.get("keys", ())) == keys:
            # Uploaded before a crash or a failed create, batch not created yet: reuse the file if it is still there.
            try:
                return self._create(client, state, state_path, look_first=True)
            except (openai.NotFoundError, openai.BadRequestError) as exc:
                log.warning("stored input file %s not usable (%s): uploading again", state["input_file_id"], exc)
        rid = round_id(keys)
        lines = [batch_line(k, self.settings.model, *pending[k]) for k in keys]
        uploaded = client.files.create(file=(f"stsgen-{rid[:16]}.jsonl", to_jsonl(lines), "application/jsonl"),
                                       purpose="batch")
        self.stats.files_uploaded += 1
        state = {"version": STATE_VERSION, "round": rid, "model": self.settings.model, "endpoint": ENDPOINT,
                 "input_file_id": uploaded.id, "batch_id": None, "keys": keys, "created_at": time.time()}
        write_state(state_path, state)  # before the batch exists: a crash from here on never pays twice
        return self._create(client, state, state_path, look_first=False)  # a new file: no batch can have it yet

    def _create(self, client: openai.OpenAI, state: dict, state_path: Path, *, look_first: bool) -> Any:
        """The round's batch: one the endpoint already made from the stored input file, else a new one. The create
        call is not retried blindly: its answer may be lost after the batch was made, so each retry looks first
        (and so does the first try when the file comes from an earlier run: `look_first`)."""
        for attempt in range(self.settings.max_retries + 1):
            batch = find_batch(client, state["input_file_id"]) if attempt or look_first else None
            if batch is not None:
                self.stats.batches_reattached += 1
                log.info("found batch %s of input file %s (%s)", batch.id, state["input_file_id"], batch.status)
                break
            try:
                batch = client.with_options(max_retries=0).batches.create(
                    input_file_id=state["input_file_id"], endpoint=ENDPOINT, completion_window="24h",
                    metadata={"stsgen_round": state["round"][:64]})
            except (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError):
                if attempt == self.settings.max_retries:
                    raise
                self.sleep(self.llm._backoff(attempt))  # the direct calls' backoff (capped, jittered)
                continue
            self.stats.batches_created += 1
            self.stats.batch_lines += len(state["keys"])
            log.info("submitted batch %s: %d requests", batch.id, len(state["keys"]))
            break
        write_state(state_path, {**state, "batch_id": batch.id})
        return batch

    def _wait(self, client: openai.OpenAI, batch: Any) -> Any:
        polls = 0
        while batch.status not in TERMINAL:
            if self.max_polls is not None and polls >= self.max_polls:
                raise BatchPending(f"batch {batch.id} still {batch.status} after {polls} polls")
            self.sleep(self.poll_s)
            batch = client.batches.retrieve(batch.id)
            polls += 1
        return batch

    def _collect(self, client: openai.OpenAI, batch: Any, pending: dict[str, Request]) -> dict[str, CallResult]:
        lines: dict[str, dict[str, Any]] = {}
        bad = 0
        # Error file first, output second: a request in both (should not happen) counts as answered.
        for file_id in (batch.error_file_id, batch.output_file_id):
            if file_id:
                parsed, n_bad = parse_lines(client.files.content(file_id).text)
                lines.update(parsed)
                bad += n_bad
        if bad:
            self.llm._error("batch_bad_line")
        results = {}
        for key in pending:
            line = lines.get(key)
            if line is None:
                detail = _batch_errors(batch)
                results[key] = self._fail(key, "batch_missing", f"no result for this request in batch {batch.id} "
                                          f"(status {batch.status}{': ' + detail if detail else ''})")
                continue
            value, kind, error = line_outcome(line)
            if value is None:
                results[key] = self._fail(key, kind or "batch_line_error", f"batch {batch.id}: {error}")
                continue
            self.llm._add(prompt_tokens=value["prompt_tokens"], completion_tokens=value["completion_tokens"])
            if self.llm.cache is not None:
                self.llm.cache.put(key, value)
            results[key] = CallResult(ok=True, key=key, **value)
        log.info("batch %s %s: %d/%d requests answered", batch.id, batch.status,
                 sum(r.ok for r in results.values()), len(results))
        return results

    def _fail(self, key: str, kind: str, error: str) -> CallResult:
        self.llm._error(kind)
        self.llm._add(failures=1)
        self.stats.batch_lines_failed += 1
        return CallResult(ok=False, error=redact(error, self.settings), key=key)
