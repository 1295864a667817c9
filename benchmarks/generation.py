"""Stage-1 generation throughput, measured side by side in one run.

(a) orchestration overhead: the flow against an instant scripted server vs a plain sequential `openai` loop
    sending the same number of requests to the same server;
(b) real local model (default Qwen2.5-Coder-1.5B), per server engine (llama.cpp's llama-server with 4 slots,
    llama-cpp-python's server): the server's ceiling — a plain sequential loop (per sentence: positive, then
    intermediate and negative from it; consecutive requests share their few-shot prefix, which the server reuses) —
    the same loop with 4 sentences in flight, and the flow (max_concurrency 4, judge off so that it sends the same
    requests), all on the same sentences; the flow as a share of the best ceiling measured in the run.

    .venv/bin/python -m benchmarks.generation --part a --n 300
    .venv/bin/python -m benchmarks.generation --part b --n 16 [--model qwen2.5-coder-1.5b-instruct]
(c) a GPU endpoint's shape: the flow against the scripted server answering each request after 200 ms (a served model
    that is never the bottleneck), max_concurrency 16 / 64 / 256, then the same at 256 with an instant server — the
    orchestration limit.

    .venv/bin/python -m benchmarks.generation --part c --n 600

Responses are not cached in either arm (cache off), so both pay for every request.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import openai

import benchmarks.prefect_env  # noqa: F401  (sets Prefect's env before Prefect is imported)
from flows.generate_sts_triples import generate_sts_triples
from tasks.core.config import CorpusSettings, LLMSettings
from tasks.corpus.sentences import load_corpus
from tasks.generate.anchors import AnchorSettings, sample_anchors
from tasks.generate.patterns import load_pattern_source, sample_examples
from tasks.generate.settings import GenerateSettings, PatternSettings, SamplingSettings, VerifierSettings
from tasks.llm.prompting import KINDS_BY_PATTERN, load_template


def flow_arm(base_url: str, model: str, n: int, concurrency: int, out: Path, judge: bool = True) -> dict:
    started = time.perf_counter()
    settings = GenerateSettings(n=n, max_attempts=1, batch_size=64, verifier=VerifierSettings(judge=judge))
    paths = generate_sts_triples(settings=settings, llm=LLMSettings(base_url=base_url, model=model, cache_path="off",
                                                                    max_concurrency=concurrency),
                                 output_dir=str(out))
    wall = time.perf_counter() - started
    manifest = json.loads(Path(paths["manifest"]).read_text())
    gen_s = manifest["timings"]["generation_s"]
    sent = manifest["llm_stats"]["requests_sent"]
    return {"requests": sent, "generation_s": gen_s, "wall_s": round(wall, 2), "rps": sent / gen_s,
            "tokens_per_s": manifest["llm_stats"]["completion_tokens"] / gen_s,
            "errors": manifest["llm_stats"].get("errors_by_kind", {})}


def plain_arm(base_url: str, model: str, n: int, seed: int = 13, in_flight: int = 1) -> dict:
    """The obvious script: for each sentence, three sequential calls with a plain OpenAI client; `in_flight`
    sentences at a time (threads)."""
    from concurrent.futures import ThreadPoolExecutor

    corpus = load_corpus(CorpusSettings())
    sample, _ = sample_anchors(corpus, n, seed, AnchorSettings())  # the sources stage 1 draws
    kinds = KINDS_BY_PATTERN["sts"]
    examples = sample_examples(load_pattern_source(PatternSettings()), kinds, 3, seed)
    systems = {k: load_template("sts", k).system_message([vars(e) for e in examples[k]]) for k in kinds}
    sampling = SamplingSettings()
    client = openai.OpenAI(base_url=base_url, api_key="sk-no-key")

    completion_tokens = []

    def ask(i: int, kind: str, text: str) -> str:
        response = client.chat.completions.create(
            model=model, messages=[{"role": "system", "content": systems[kind]}, {"role": "user", "content": text}],
            temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=i)
        completion_tokens.append(response.usage.completion_tokens)
        return response.choices[0].message.content or ""

    def sentence(item: tuple[int, str]) -> int:
        i, anchor = item
        positive = ask(i, "positive", anchor)
        ask(i, "intermediate", positive)
        ask(i, "negative", positive)
        return 3

    started = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        sent = sum(pool.map(sentence, enumerate(sample["text"])))
    elapsed = time.perf_counter() - started
    return {"requests": sent, "generation_s": round(elapsed, 2), "rps": sent / elapsed,
            "tokens_per_s": sum(completion_tokens) / elapsed}


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory (Linux VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def server_arms(model: str, n: int, out: Path, engines: list[str] | None = None,
                arms: list[str] | None = None) -> None:
    """Part (b): each engine's ceiling, its rate with requests in flight, and the flow's rate, in one run."""
    import os

    from tasks.llm.server import local_server, server_binary

    engines = engines or (["llama-server"] if server_binary() else []) + ["llama-cpp-python"]
    print(f"## stage 1 on the local server ({model}, n={n} sentences = {3 * n} requests per arm)\n")
    print("| server | arm | requests | seconds | requests/s | completion tokens/s |\n|---|---|---|---|---|---|")
    rows, peaks = [], {}
    for engine in engines:
        with local_server(model, engine=engine, parallel=4) as server:
            os.environ["STSGEN_LLM_SERVER_ENGINE"] = server.engine  # as the CLI does: the flow's request order
            for arm, run in (("sequential loop (ceiling)", lambda: plain_arm(server.base_url, server.model, n)),
                             ("loop, 4 sentences in flight",
                              lambda: plain_arm(server.base_url, server.model, n, in_flight=4)),
                             ("generate-sts-triples flow, max_concurrency 4",
                              lambda: flow_arm(server.base_url, server.model, n, 4, out / engine, judge=False))):
                if arms and not any(arm.startswith(a) for a in arms):
                    continue
                result = run()
                rows.append((engine, arm, result["tokens_per_s"]))
                print(f"| {engine} | {arm} | {result['requests']} | {result['generation_s']:.1f} | "
                      f"{result['rps']:.3f} | {result['tokens_per_s']:.1f} |", flush=True)
            peaks[engine] = peak_rss_mib(server.process.pid)
    # Compared in completion tokens/s: the flow sends fewer requests than the loops (a rejected positive gets no
    # intermediate or negative) and its requests differ in length, so requests/s alone would mislead.
    sequential = max((tps for _, arm, tps in rows if arm.startswith("sequential")), default=None)
    best = max((tps for _, arm, tps in rows if not arm.startswith("generate")), default=None)
    for engine, arm, tps in rows:
        if arm.startswith("generate") and best:
            print(f"\n{engine}: flow at {tps / best:.0%} of the best loop ({best:.1f} tokens/s)"
                  + (f", {tps / sequential:.0%} of the best sequential loop ({sequential:.1f})" if sequential else ""))
    print("peak memory (VmHWM) of each server: " + ", ".join(f"{e} {m:.0f} MiB" for e, m in peaks.items()))


def concurrency_sweep(n: int, out: Path, latency_s: float = 0.2) -> None:
    """The scripted server runs in its own process (in this one it would share the GIL and the cores' time with the
    flow and lower the very limit being measured)."""
    import subprocess
    import sys

    print(f"## generation flow vs max_concurrency (scripted server process, {latency_s * 1000:.0f} ms per request, "
          f"n={n})\n")
    print("| server latency | max_concurrency | requests | seconds | requests/s | ideal (in flight / latency) |\n"
          "|---|---|---|---|---|---|")
    for latency, concurrency in ((latency_s, 16), (latency_s, 64), (latency_s, 256), (0.0, 256)):
        server = subprocess.Popen([sys.executable, "-m", "tasks.llm.scripted_server", "0", str(latency)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            base_url = server.stdout.readline().strip()
            flow = flow_arm(base_url, "scripted-model", n, concurrency, out / f"c{concurrency}-{latency}")
        finally:
            server.terminate()
            server.wait(10)
        ideal = f"{concurrency / latency:.0f}" if latency else "—"
        print(f"| {latency * 1000:.0f} ms | {concurrency} | {flow['requests']} | {flow['generation_s']:.1f} | "
              f"{flow['rps']:.0f} | {ideal} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=("a", "b", "c"), required=True)
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--engine", action="append", choices=("llama-server", "llama-cpp-python"),
                        help="part b: only this server engine (repeatable; default both)")
    parser.add_argument("--arm", action="append", choices=("sequential", "loop", "generate"),
                        help="part b: only this arm (repeatable; default all)")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="stsgen-bench-"))
    if args.part == "a":
        from tasks.llm.scripted_server import ScriptedOpenAI

        n = args.n or 300
        with ScriptedOpenAI() as server:
            plain = plain_arm(server.base_url, "scripted-model", n)
            flow = flow_arm(server.base_url, "scripted-model", n, args.concurrency or 16, out)
        label = "instant scripted server"
    elif args.part == "c":
        return concurrency_sweep(args.n or 600, out)
    else:
        return server_arms(args.model, args.n or 16, out, args.engine, args.arm)
    print(f"## generation benchmark ({label}, n={n} sentences)")
    print(f"plain sequential openai loop: {plain['requests']} requests in {plain['generation_s']:.2f} s "
          f"= {plain['rps']:.2f} req/s")
    print(f"generate-sts-triples flow:    {flow['requests']} requests in {flow['generation_s']:.2f} s "
          f"= {flow['rps']:.2f} req/s (flow wall incl. Prefect startup {flow['wall_s']:.1f} s); "
          f"retried errors: {flow['errors'] or 'none'}")
    print(f"ratio flow/plain: {flow['rps'] / plain['rps']:.2f}x")


if __name__ == "__main__":
    main()
