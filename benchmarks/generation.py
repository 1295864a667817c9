"""Stage-1 generation throughput, measured side by side in one run.

(a) orchestration overhead: the flow against an instant scripted server vs a plain sequential `openai` loop
    sending the same number of requests to the same server;
(b) real local model (llama.cpp, default Qwen2.5-Coder-1.5B): the flow's requests/s vs a plain sequential loop
    (per sentence: positive, then intermediate and negative from it — the obvious script) on the same sentences.

    .venv/bin/python -m benchmarks.generation --part a --n 300
    .venv/bin/python -m benchmarks.generation --part b --n 20 [--model qwen2.5-coder-1.5b-instruct]
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
from tasks.config import CorpusSettings, LLMSettings, PatternSettings, SamplingSettings
from tasks.corpus import load_corpus, sample_sources
from tasks.patterns import load_pattern_source, sample_examples
from tasks.prompting import KINDS_BY_PATTERN, load_template


def flow_arm(base_url: str, model: str, n: int, concurrency: int, out: Path) -> dict:
    started = time.perf_counter()
    paths = generate_sts_triples(n=n, llm=LLMSettings(base_url=base_url, model=model, cache_path="off",
                                                      max_concurrency=concurrency),
                                 max_attempts=1, batch_size=64, output_dir=str(out))
    wall = time.perf_counter() - started
    manifest = json.loads(Path(paths["manifest"]).read_text())
    gen_s = manifest["timings"]["generation_s"]
    sent = manifest["llm_stats"]["requests_sent"]
    return {"requests": sent, "generation_s": gen_s, "wall_s": round(wall, 2), "rps": sent / gen_s,
            "errors": manifest["llm_stats"].get("errors_by_kind", {})}


def plain_arm(base_url: str, model: str, n: int, seed: int = 13) -> dict:
    """The obvious script: for each sentence, three sequential calls with a plain OpenAI client."""
    corpus = load_corpus(CorpusSettings())
    sample, _ = sample_sources(corpus, n, seed)
    kinds = KINDS_BY_PATTERN["sts"]
    examples = sample_examples(load_pattern_source(PatternSettings()), kinds, 3, seed)
    systems = {k: load_template("sts", k).system_message([vars(e) for e in examples[k]]) for k in kinds}
    sampling = SamplingSettings()
    client = openai.OpenAI(base_url=base_url, api_key="sk-no-key")
    sent = 0
    started = time.perf_counter()
    for i, anchor in enumerate(sample["text"]):
        def ask(kind: str, text: str) -> str:
            nonlocal sent
            sent += 1
            response = client.chat.completions.create(
                model=model, messages=[{"role": "system", "content": systems[kind]}, {"role": "user", "content": text}],
                temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=i)
            return response.choices[0].message.content or ""

        positive = ask("positive", anchor)
        ask("intermediate", positive)
        ask("negative", positive)
    elapsed = time.perf_counter() - started
    return {"requests": sent, "generation_s": round(elapsed, 2), "rps": sent / elapsed}


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
        server = subprocess.Popen([sys.executable, "-m", "tests.scripted_openai", "0", str(latency)],
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
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="stsgen-bench-"))
    if args.part == "a":
        from tests.scripted_openai import ScriptedOpenAI

        n = args.n or 300
        with ScriptedOpenAI() as server:
            plain = plain_arm(server.base_url, "scripted-model", n)
            flow = flow_arm(server.base_url, "scripted-model", n, args.concurrency or 16, out)
        label = "instant scripted server"
    elif args.part == "c":
        return concurrency_sweep(args.n or 600, out)
    else:
        from tasks.llm.server import local_server

        n = args.n or 20
        with local_server(args.model) as server:
            plain = plain_arm(server.base_url, server.model, n)
            flow = flow_arm(server.base_url, server.model, n, args.concurrency or 4, out)
        label = f"local llama.cpp, {args.model}"
    print(f"## generation benchmark ({label}, n={n} sentences)")
    print(f"plain sequential openai loop: {plain['requests']} requests in {plain['generation_s']:.2f} s "
          f"= {plain['rps']:.2f} req/s")
    print(f"generate-sts-triples flow:    {flow['requests']} requests in {flow['generation_s']:.2f} s "
          f"= {flow['rps']:.2f} req/s (flow wall incl. Prefect startup {flow['wall_s']:.1f} s); "
          f"retried errors: {flow['errors'] or 'none'}")
    print(f"ratio flow/plain: {flow['rps'] / plain['rps']:.2f}x")


if __name__ == "__main__":
    main()
