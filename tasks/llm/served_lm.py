"""Stage-3 LM scoring through a served LLM: log-probs of prompt tokens from an OpenAI-compatible /v1/completions
endpoint (`echo` + `logprobs`, one generated token), so the labeler's λ2/λ4 terms run on a GPU server (vLLM) or on
llama-cpp-python's server instead of in-process.

Same inputs and outputs as the in-process scorer (`models.causal_lm.score_groups`): groups of a prefix and
continuations of token-id segments, tokenized by the served model's own tokenizer loaded here, and per segment the
summed log-probability and token count. One request per prefix + continuation, sent in group order so the server's
prefix cache keeps a context's c< across its sentences (vLLM's automatic prefix caching, llama.cpp's prefix match).
Requests go through `LLMClient`: stage 1's content-addressed response cache (a re-run pays for nothing twice), its
limiter and its retries.

Prompt form, found once per endpoint by `probe`:
- token ids (vLLM and the OpenAI API take `prompt: [ids]`): segment boundaries are exact;
- text (llama-cpp-python's server takes strings only): the ids are decoded and the server re-tokenizes the text;
  every answer is checked to hold exactly as many prompt tokens as were meant, so a re-tokenization that moved a
  segment boundary is an error, never a shifted sum. llama-cpp-python drops a leading BOS from the echo and pairs
  every other first token with the wrong position, so text prompts must start with the model's BOS
  (label.start_token = 'bos').
llama.cpp's own `llama-server` does not echo prompt log-probs: `probe` says so before any shard runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.causal_lm import Group, TokenizedLM, load_tokenizer
from tasks.core.config import ConfigError, LLMSettings
from tasks.llm.client import CallResult, LLMClient


class ServedScoringError(RuntimeError):
    """An answer that cannot be turned into scores (failed call after retries, wrong token count)."""


@dataclass
class ServedLM(TokenizedLM):
    """A tokenizer plus an endpoint that scores token sequences. `prompt_form` is 'ids' or 'text' (see `probe`);
    `server_adds_bos`: the server puts its own BOS before a text prompt (the text then leaves ours out)."""

    llm: LLMSettings = None
    prompt_form: str = "ids"
    server_adds_bos: bool = False
    client: LLMClient = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.client = self.client or LLMClient(self.llm)

    def prompt(self, ids: list[int]) -> list[int] | str:
        """What is sent for a token sequence: the ids, or their text (without our BOS when the server adds one)."""
        if self.prompt_form == "ids":
            return ids
        return self.tokenizer.decode(ids[1:] if self.server_adds_bos else ids, skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)

    def token_logprobs(self, ids: list[int], result: CallResult) -> list[float | None]:
        """log p(ids[i] | ids[:i]) per position i (None where the endpoint gives none: at least position 0)."""
        if not result.ok:
            raise ServedScoringError(f"{self.llm.base_url}: prompt log-probs failed: {result.error}")
        values = result.prompt_logprobs
        if not values or all(v is None for v in values):
            raise ServedScoringError(no_logprobs_message(self.llm))
        echoed = len(values) - result.completion_tokens
        # ids: one entry per prompt token. text: llama-cpp-python echoes all but the leading BOS.
        skipped = len(ids) - echoed
        if skipped not in (0, 1) or (skipped == 1 and self.prompt_form == "ids"):
            raise ServedScoringError(
                f"{self.llm.base_url} echoed {echoed} prompt tokens for a {len(ids)}-token prompt: its tokenizer split "
                f"the text differently from label.lm ({self.path.name}); set label.lm to the served model's own "
                "tokenizer")
        return [None] * skipped + list(values[:echoed])

    def score(self, groups: list[Group], max_batch_tokens: int = 2048) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per group: (sums, counts), each (n_continuations, n_segments); one request per continuation."""
        sequences = [g.prefix + [t for seg in cont for t in seg] for g in groups for cont in g.continuations]
        results = asyncio.run(self.client.prompt_logprobs_many([self.prompt(s) for s in sequences]))
        out, k = [], 0
        for g in groups:
            n_seg = max((len(c) for c in g.continuations), default=0)
            sums, counts = np.zeros((len(g.continuations), n_seg)), np.zeros((len(g.continuations), n_seg), np.int64)
            for c, cont in enumerate(g.continuations):
                logprobs = self.token_logprobs(sequences[k], results[k])
                k += 1
                start = len(g.prefix)
                for j, seg in enumerate(cont):
                    part = logprobs[start : start + len(seg)]
                    if any(v is None for v in part):
                        raise ServedScoringError(f"{self.llm.base_url} gave no log-prob for a scored token at "
                                                 f"position {start} (a prefix of {len(g.prefix)} tokens is too short "
                                                 "for this endpoint's echo)")
                    sums[c, j], counts[c, j] = float(sum(part)), len(seg)
                    start += len(seg)
            out.append((sums, counts))
        return out


def no_logprobs_message(llm: LLMSettings) -> str:
    return (f"label.lm_endpoint {llm.base_url} (model '{llm.model}') returns no prompt log-probs: stage-3 scoring "
            "needs /v1/completions with echo=true and logprobs (vLLM, llama-cpp-python's server; llama.cpp's "
            "llama-server does not echo them). Point label.lm_endpoint at such an endpoint, or unset it to score label.lm in-process.")


def probe(llm: LLMSettings, tokenized: TokenizedLM, start: list[int]) -> tuple[str, bool]:
    """(prompt form, server adds its own BOS) of the endpoint, from two small requests; ConfigError when the
    endpoint cannot score prompts — before any shard runs."""
    client = LLMClient(llm.model_copy(update={"cache_path": "off", "max_retries": 0}))
    ids = start + tokenized.encode([" The cat sat on the mat."], 16)[0]
    result = asyncio.run(client.prompt_logprobs(ids))
    form, adds_bos = "ids", False
    # An endpoint that refuses token-id prompts (llama-cpp-python answers its validation error with a 500) gets text.
    if not result.ok and not {"timeout", "connection"} & set(client.stats.errors_by_kind):
        form = "text"
        if start != tokenized.start_ids or tokenized.tokenizer.bos_token_id is None:
            raise ConfigError(f"label.lm_endpoint {llm.base_url} takes text prompts only and drops a leading BOS "
                              "from its echo: set label.start_token to 'bos' (its log-probs would be misaligned)")
        text = tokenized.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        first_error, result = result.error, asyncio.run(client.prompt_logprobs(text))
        adds_bos = result.ok and result.prompt_tokens == len(ids) + 1
        if not result.ok:
            raise ConfigError(f"label.lm_endpoint {llm.base_url}: POST /completions failed with a token-id prompt "
                              f"({first_error[:300]}) and with a text prompt ({result.error[:300]}); "
                              + no_logprobs_message(llm))
    if not result.ok:
        raise ConfigError(f"label.lm_endpoint {llm.base_url}: POST /completions failed ({result.error[:300]}); "
                          + no_logprobs_message(llm))
    if not result.prompt_logprobs or all(v is None for v in result.prompt_logprobs):
        raise ConfigError(no_logprobs_message(llm))
    return form, adds_bos


def served_lm(llm: LLMSettings, tokenizer_path: Path, start_token: str) -> ServedLM:
    """A ServedLM ready to score: the tokenizer loaded, the endpoint probed."""
    tokenized = load_tokenizer(tokenizer_path)
    form, adds_bos = probe(llm, tokenized, tokenized.start_for(start_token))
    return ServedLM(tokenizer=tokenized.tokenizer, path=tokenizer_path, llm=llm, prompt_form=form,
                    server_adds_bos=adds_bos)
