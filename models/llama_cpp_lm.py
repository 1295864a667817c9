"""The labeler's LM scorer on llama.cpp, in-process through llama-cpp-python: the same `Group` scoring as
models/causal_lm.py (summed log-probs and token counts per segment of each continuation), from a GGUF as it is
quantized, without dequantizing it into torch.

Why not transformers here: on CPUs the quantized GGUF kernels of llama.cpp read ~6× fewer weight bytes than the
float32 model transformers builds from the same file, and a group's prefix is evaluated once: each continuation
rolls the key/value cache back to the prefix (`n_tokens`, which `Llama.eval` truncates the cache to) instead of
copying it per row. Prompt-token logits come from `logits_all=True`; their log-softmax is taken in numpy.
Measured side by side with the transformers float32 scorer in benchmarks/scorer.py (docs/results.md).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.causal_lm import Group, TokenizedLM, load_tokenizer

# Room for [start] c> ⏎ c< s c> at the labeler's largest segment sizes; a longer sequence is refused, not cut.
DEFAULT_CONTEXT = 1024


@dataclass
class LlamaCppLM(TokenizedLM):
    llama: object = None
    # One llama.cpp context holds one sequence's cache: threads sharing the (cached) scorer take turns.
    lock: threading.Lock = field(default_factory=threading.Lock)

    def score(self, groups: list[Group], max_batch_tokens: int = 2048) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per group: (sums, counts), each (n_continuations, n_segments) — as models.causal_lm.score_groups.
        `max_batch_tokens` is unused: llama.cpp batches a sequence's tokens itself (n_batch)."""
        with self.lock:
            return [score_group(self.llama, g) for g in groups]


def load_llama_cpp_lm(path: Path, threads: int | None = None, n_ctx: int = DEFAULT_CONTEXT) -> LlamaCppLM:
    """A GGUF file scored by llama.cpp; its tokenizer (through transformers) gives the segment token ids, so the
    segments are the same ids the transformers scorer reads."""
    if path.suffix != ".gguf":
        raise ValueError(f"{path}: the llama.cpp scorer reads a .gguf file; use scorer='transformers' for a "
                         "transformers folder")
    from llama_cpp import Llama  # the compiled library: imported only when this scorer is chosen

    threads = threads or os.cpu_count() or 1
    llama = Llama(model_path=str(path), n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, logits_all=True,
                  n_threads=threads, n_threads_batch=threads, verbose=False)
    base = load_tokenizer(path)
    return LlamaCppLM(tokenizer=base.tokenizer, path=path, llama=llama)


def token_log_probs(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """log softmax(logits)[target] per row, (T, V) float32 → (T,) float64."""
    x = logits.astype(np.float64, copy=False)
    top = x.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(x - top).sum(axis=1))
    return x[np.arange(len(targets)), targets] - lse


def score_group(llama, group: Group) -> tuple[np.ndarray, np.ndarray]:
    """Evaluate the prefix once; every continuation is evaluated on top of it (the cache rolled back to the prefix
    between them). The prefix's last row predicts each continuation's first token."""
    n_seg = max((len(c) for c in group.continuations), default=0)
    sums = np.zeros((len(group.continuations), n_seg))
    counts = np.zeros((len(group.continuations), n_seg), dtype=np.int64)
    if not group.continuations:
        return sums, counts
    longest = len(group.prefix) + max(sum(len(s) for s in c) for c in group.continuations)
    if longest > llama.n_ctx():
        raise ValueError(f"a scored sequence of {longest} tokens exceeds the llama.cpp context of {llama.n_ctx()}")
    llama.reset()
    llama.eval(group.prefix)
    p = llama.n_tokens
    first = llama.scores[p - 1].copy()
    for c, segments in enumerate(group.continuations):
        flat = [t for seg in segments for t in seg]
        if not flat:
            continue
        llama.n_tokens = p  # eval() drops the cache beyond the prefix
        llama.eval(flat)
        rows = np.vstack([first[None, :], llama.scores[p : p + len(flat) - 1]])
        logp = token_log_probs(rows, np.asarray(flat))
        start = 0
        for k, seg in enumerate(segments):
            sums[c, k] = float(logp[start : start + len(seg)].sum())
            counts[c, k] = len(seg)
            start += len(seg)
    return sums, counts
