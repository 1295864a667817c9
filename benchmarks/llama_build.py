"""llama.cpp's build at setup: how long it compiles and how fast the server it yields answers, per optimisation
profile, measured side by side in one run.

Setup compiles llama.cpp once (tasks/llm/llama_build.py), and on 2 cores that compile is setup's long pole. Only
ggml's kernels do the arithmetic of inference; llama-server's HTTP, JSON, chat-template and argument code, the
multimodal library and libllama's graph building run once per request or per token. The `light`
profile (tasks/llm/llama_profile.cmake, setup's default) builds those cheaper and ggml as released; this script
shows what that saves at setup and costs at serving time.

    .venv/bin/python -m benchmarks.llama_build --part compile              # each profile compiled from the sdist
    .venv/bin/python -m benchmarks.llama_build --part serve --rounds 8     # both builds serving the 1.5B model (a
                                                                           # build not cached compiles first)

`serve` starts each build's llama-server in turn (ABBA…, the same model, 2 threads, one slot) and sends the same
requests (a fixed few-shot prefix, then a different sentence each, temperature 0, 48 tokens), reading the server's
own timings: prompt and generation tokens per second, and the wall time of all requests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from tasks.llm import llama_build
from tasks.llm.local_models import resolve_gguf
from tasks.llm.server import _healthy as healthy
from tasks.llm.server import free_port

PROFILES = ("release", "light")
SENTENCES = [
    "The committee approved the new budget after a three-hour debate on Tuesday.",
    "A small dog chased the red ball across the wet grass in the park.",
    "Shares of the carmaker fell four percent after it cut its annual forecast.",
    "The museum will reopen its Egyptian gallery next spring after renovation.",
    "Two men are playing chess at a wooden table outside a cafe.",
    "The storm knocked out power to thousands of homes along the coast.",
    "She learned to play the violin while living with her grandparents in Vienna.",
    "The new bridge cut the commute between the two towns by half an hour.",
]
PREFIX = ("Rewrite the sentence so that it means the same but uses different words.\n"
          "Sentence: A man is slicing a tomato on a cutting board.\nRewrite: A person cuts a tomato on a board.\n"
          "Sentence: The company reported higher profits for the third quarter.\nRewrite: Third-quarter profits at "
          "the firm went up.\n"
          "Sentence: Children are swimming in a lake near the mountains.\nRewrite: Kids swim in a mountain lake.\n")


def profile_file(profile: str) -> Path | None:
    return llama_build.PROFILE if profile == "light" else None


def compile_profile(profile: str, version: str, work: Path) -> float:
    source = llama_build.fetch_sdist(version, work / profile)
    started = time.perf_counter()
    llama_build.compile_server(source, work / profile / "build", llama_build.cmake_flags(), 2, profile_file(profile))
    return time.perf_counter() - started


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def serve_once(build: Path, model: Path) -> dict:
    port = free_port()
    proc = subprocess.Popen([str(build / llama_build.BINARY), "-m", str(model), "--host", "127.0.0.1", "--port",
                             str(port), "-t", "2", "-tb", "2", "-c", "2048", "--parallel", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not healthy(f"http://127.0.0.1:{port}/v1"):  # the embedded server's own readiness probe
            if proc.poll() is not None:
                raise RuntimeError(f"{build / llama_build.BINARY} exited with {proc.returncode} before it served")
            time.sleep(0.5)
        prompt_rates, gen_rates, started = [], [], time.perf_counter()
        for sentence in SENTENCES:
            answer = post(f"http://127.0.0.1:{port}/v1/chat/completions", {
                "messages": [{"role": "user", "content": f"{PREFIX}Sentence: {sentence}\nRewrite:"}],
                "temperature": 0, "max_tokens": 48, "seed": 0})
            timings = answer["timings"]
            prompt_rates.append(timings["prompt_per_second"])
            gen_rates.append(timings["predicted_per_second"])
        return {"wall_s": time.perf_counter() - started, "prompt_tok_s": statistics.median(prompt_rates),
                "gen_tok_s": statistics.median(gen_rates)}
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["compile", "serve"], required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--version", default="0.3.36", help="llama-cpp-python's version (pyproject pins it)")
    parser.add_argument("--model", type=Path, help="a GGUF (default: the stage-1 generator in $STSGEN_HOME/models)")
    args = parser.parse_args()
    if args.part == "compile":
        with tempfile.TemporaryDirectory(prefix="stsgen-llama-bench-") as tmp:
            for profile in PROFILES:
                print(f"{profile}: compiled in {compile_profile(profile, args.version, Path(tmp)):.0f} s", flush=True)
        return
    model = args.model or resolve_gguf("qwen2.5-coder-1.5b-instruct")[0]
    builds = {p: llama_build.build(args.version, llama_build.cmake_flags(), profile=profile_file(p))
              for p in PROFILES}
    rows = {p: [] for p in PROFILES}
    for round_ in range(args.rounds):  # ABBA…: a drift of the machine's speed falls on both
        for profile in PROFILES if round_ % 2 == 0 else PROFILES[::-1]:
            rows[profile].append(serve_once(builds[profile], model))

    def spread(runs: list[dict], key: str) -> str:
        values = [r[key] for r in runs]
        return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"

    print(f"| profile | wall s of {len(SENTENCES)} requests, median [min–max] of {args.rounds} rounds | prompt tok/s | "
          "generation tok/s |")
    print("|---|---|---|---|")
    for profile, runs in rows.items():
        cells = [spread(runs, key) for key in ("wall_s", "prompt_tok_s", "gen_tok_s")]
        print(f"| {profile} | {' | '.join(cells)} |")
    base, light = (statistics.median(r["wall_s"] for r in rows[p]) for p in PROFILES)
    print(f"light / release wall time: {light / base:.3f}")


if __name__ == "__main__":
    main()
