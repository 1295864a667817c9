"""Stage-3 LM scorers side by side on the same (sentence, context) inputs, one run: the in-process transformers
scorer (SmolLM2-135M's GGUF dequantized to float32; c< once per context, its KV cache shared by the sentences, the
reference) against the in-process llama.cpp scorer (llama-cpp-python on the GGUF as quantized, prompt-token logits,
the c< prefix evaluated once per context) and the served scorer (`label.lm_endpoint`: llama-cpp-python's server on 127.0.0.1 with the same GGUF, one
/v1/completions echo request per (s, c), the response cache off so every request is paid for).

Inputs: STS-B dev sentences (s) and contexts (c<, c>) of consecutive sentences of the default corpus, drawn with a
fixed seed — a throughput and agreement check, not a label-quality one (that is benchmarks/labeling.py).
Prints scored tokens/s per scorer, the ratio, the agreement of the per-(s, c) scores, the Spearman between the two
scorers' labels of every sentence pair (centred cosine of the score rows, as the labeler computes them), and the
server's peak RSS.

    .venv/bin/python -m benchmarks.scorer [--sentences 8] [--contexts 8] [--concurrency 1,2]
    # on a GPU node: the served row against vLLM, the in-process row on the GPU, same model
    .venv/bin/python -m benchmarks.scorer --lm /models/Qwen2.5-7B --base-url http://127.0.0.1:8000/v1 \
        --model Qwen/Qwen2.5-7B --concurrency 16,64 --sentences 32 --contexts 16
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import psutil  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import spearmanr  # noqa: E402

from tasks.core.config import CorpusSettings  # noqa: E402
from tasks.core.sts_data import read_stsb  # noqa: E402
from tasks.corpus.sentences import load_corpus  # noqa: E402
from tasks.label.label_similarity import CONSTANT_RTOL, similarity_matrix  # noqa: E402
from tasks.label.labeling import LabelSettings, context_groups  # noqa: E402
from tasks.label.scorer import load_scorer, resolve_lm  # noqa: E402
from tasks.llm.server import local_server  # noqa: E402

MODEL = "smollm2-135m-instruct"


def inputs(n_sentences: int, n_contexts: int, seed: int = 0) -> tuple[list[str], list[str], list[str]]:
    rng = np.random.default_rng(seed)
    dev = read_stsb("dev")["s1"].drop_duplicates().to_numpy()
    sentences = [str(s) for s in dev[rng.permutation(len(dev))[:n_sentences]]]
    text = load_corpus(CorpusSettings()).usable["text"].to_numpy()
    starts = rng.permutation(len(text) - 1)[:n_contexts]
    return sentences, [str(text[i]) for i in starts], [str(text[i + 1]) for i in starts]


def groups_for(lm, settings: LabelSettings, sentences, lefts, rights):
    m = settings.max_segment_tokens
    return context_groups(lm, lm.encode(lefts, m, keep="end"), lm.encode([" " + s for s in sentences], m),
                          lm.encode([" " + t for t in rights], m), with_right=False,
                          start=lm.start_for(settings.start_token))


def score_rows(scored) -> np.ndarray:
    """(sentences, contexts) mean token log-probs from per-context (sums, counts)."""
    return np.stack([sums[:, 0] / np.maximum(counts[:, 0], 1) for sums, counts in scored], axis=1)


def pair_labels(rows: np.ndarray) -> np.ndarray:
    """The labeler's label of every sentence pair from one score matrix (centred cosine, upper triangle)."""
    labels = similarity_matrix(rows, "centered_cosine", np.zeros(rows.shape, dtype=bool), CONSTANT_RTOL["float32"])
    return labels[np.triu_indices(len(rows), 1)]


@contextmanager
def endpoint(args: argparse.Namespace):
    """(base URL, model name, local server pid or None): --base-url as given, else a local llama-cpp-python server."""
    if args.base_url:
        yield args.base_url, args.model, None
        return
    with local_server(args.lm, n_ctx=512, threads=args.threads, engine="llama-cpp-python") as server:
        yield server.base_url, server.model, server.process.pid


class PeakRSS:
    """Peak resident memory of a process (none: nothing to sample), sampled every 50 ms."""

    def __init__(self, pid: int | None):
        self.proc, self.peak, self._stop = pid and psutil.Process(pid), 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while self.proc and not self._stop.wait(0.05):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> "PeakRSS":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.thread.join()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=8)
    ap.add_argument("--contexts", type=int, default=8)
    ap.add_argument("--concurrency", default="1,2", help="requests in flight to the server, per served row ('' for "
                    "no served row)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lm", default=MODEL, help="the in-process model and the served model's tokenizer")
    ap.add_argument("--base-url", help="a served endpoint of the same model (default: llama-cpp-python on 127.0.0.1)")
    ap.add_argument("--model", help="the model's name at --base-url")
    ap.add_argument("--bfloat16", action="store_true", help="also the in-process transformers scorer in bfloat16 "
                    "(fast only on CPUs with native bf16: AVX-512-BF16 or AMX)")
    ap.add_argument("--no-llama-cpp", action="store_true", help="leave out the llama-cpp-python in-process row")
    args = ap.parse_args()
    sentences, lefts, rights = inputs(args.sentences, args.contexts)
    local = LabelSettings(method="context", lambda_disc=0.0, lm=args.lm, threads=args.threads, scorer="transformers",
                          dtype="float32")
    lm = load_scorer(local, *map(str, resolve_lm(local)))
    groups = groups_for(lm, local, sentences, lefts, rights)
    tokens = sum(len(seg) for g in groups for cont in g.continuations for seg in cont)
    n_inputs = sum(len(g.continuations) for g in groups)
    print(f"{len(groups)} contexts × {len(sentences)} sentences = {n_inputs} (s, c) inputs, {tokens} scored tokens "
          f"(+ {sum(len(g.prefix) for g in groups)} prefix tokens, once per context in-process)\n")
    lm.score(groups[:1])  # warm-up
    t = time.perf_counter()
    reference = lm.score(groups, local.max_batch_tokens)
    t_local = time.perf_counter() - t
    rows = [(f"in-process (transformers, float32 on {lm.device}, shared c< KV cache)", t_local, None, None, None)]

    def compare(name: str, result, elapsed: float) -> None:
        other, ref = score_rows(result), score_rows(reference)
        diff = np.abs(other - ref)
        rows.append((name, elapsed, diff.mean(), diff.max(),
                     spearmanr(pair_labels(other), pair_labels(ref)).statistic))

    def timed(name: str, settings: LabelSettings) -> None:
        """One in-process scorer row: loaded, warmed up, then timed on every group."""
        scorer = load_scorer(settings, *map(str, resolve_lm(settings)))
        scorer.score(groups[:1])  # warm-up
        t = time.perf_counter()
        result = scorer.score(groups, settings.max_batch_tokens)
        compare(name.format(device=scorer.device), result, time.perf_counter() - t)

    if args.bfloat16:
        timed("in-process (transformers, bfloat16 on {device}, shared c< KV cache)",
              local.model_copy(update={"dtype": "bfloat16"}))
    if not args.no_llama_cpp:
        timed("in-process (llama.cpp through llama-cpp-python, GGUF as quantized, c< evaluated once)",
              local.model_copy(update={"scorer": "llama_cpp"}))
    if not args.concurrency:
        return report(rows, tokens, t_local, sentences, None, None)
    with endpoint(args) as (base_url, model, pid):
        with PeakRSS(pid) as rss:
            for concurrency in [int(c) for c in args.concurrency.split(",")]:
                served = LabelSettings(method="context", lambda_disc=0.0, lm=args.lm, lm_endpoint={
                    "base_url": base_url, "model": model, "max_concurrency": concurrency})
                scorer = load_scorer(served, *map(str, resolve_lm(served)))
                scorer.client = type(scorer.client)(served.lm_endpoint.model_copy(update={"cache_path": "off"}))
                t = time.perf_counter()
                result = scorer.score(groups)
                compare(f"served ({args.base_url or 'llama-cpp-python, 127.0.0.1'}, {scorer.prompt_form} prompts, "
                        f"{concurrency} in flight)", result, time.perf_counter() - t)
    report(rows, tokens, t_local, sentences, pid, rss)


def report(rows, tokens: int, t_local: float, sentences: list[str], pid, rss) -> None:
    n_pairs = len(sentences) * (len(sentences) - 1) // 2
    print("| scorer | seconds | scored tokens/s | ratio to in-process | mean / max \\|Δ mean log-prob\\| | "
          f"Spearman of the {n_pairs} pair labels with in-process |")
    print("|---|---|---|---|---|---|")
    for name, seconds, mean, peak, rho in rows:
        agreement = "—" if mean is None else f"{mean:.3f} / {peak:.3f}"
        print(f"| {name} | {seconds:.1f} | {tokens / seconds:.1f} | {t_local / seconds:.3f} | {agreement} | "
              f"{'—' if rho is None else f'{rho:.3f}'} |")
    if pid:
        print(f"\nserver peak RSS: {rss.peak / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
