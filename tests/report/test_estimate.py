"""`stsgen estimate`: a run's cost scaled from earlier runs' manifests, hand-computed here; no LLM call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def _run(root: Path, name: str, model: str, sources: int, sent: int, cached: int, prompt: int, completion: int,
         total_s: float, label: tuple[int, int, int, float] | None = None) -> None:
    stage = root / name / "generate-sts-triples"
    stage.mkdir(parents=True)
    (stage / "manifest.json").write_text(json.dumps({
        "llm": {"model": model}, "counts": {"sources": sources},
        "llm_stats": {"requests_sent": sent, "cache_hits": cached},
        "cost": {"prompt_tokens": prompt, "completion_tokens": completion}, "timings": {"total_s": total_s}}))
    if label:
        stage = root / name / "label-pairs"
        stage.mkdir()
        (stage / "manifest.json").write_text(json.dumps({
            "rating": {"requests_sent": label[0], "cache_hits": 0},
            "cost": {"prompt_tokens": label[1], "completion_tokens": label[2]}, "timings": {"total_s": label[3]}}))


def _runs(root: Path) -> Path:
    _run(root, "a", "m", 10, 80, 0, 40_000, 4_000, 200.0, label=(70, 14_000, 700, 100.0))
    _run(root, "b", "m", 30, 0, 240, 120_000, 12_000, 5.0)  # all from the cache: counts, but is no measure of time
    _run(root, "c", "other", 1000, 9000, 0, 1, 1, 1.0)  # another model: not used
    return root


def test_rates_per_source_sentence_from_the_runs_of_the_model(tmp_path):
    from tasks.report.estimate import measured_rates, run_manifests

    gen, label = measured_rates(run_manifests([_runs(tmp_path)]), "m")
    # generate: (80 + 240) answers / 40 sources; 160,000 / 40 prompt; 16,000 / 40; time from run a only: 200 / 10.
    assert (gen.stage, gen.runs, gen.sources, gen.answers, gen.prompt_tokens, gen.completion_tokens, gen.seconds) \
        == ("generate-sts-triples", 2, 40, 8.0, 4000.0, 400.0, 20.0)
    assert (label.stage, label.runs, label.sources, label.answers, label.seconds) == ("label-pairs", 1, 10, 7.0, 10.0)
    assert measured_rates(run_manifests([tmp_path]), "unknown") == []


def test_the_cli_prints_the_estimate_and_sends_nothing(tmp_path):
    from tasks.llm.scripted_server import ScriptedOpenAI

    with ScriptedOpenAI(models=("m",)) as server:
        done = subprocess.run([sys.executable, "-m", "flows.cli", "estimate", "--n", "100", "--model", "m",
                               "--base-url", server.base_url, "--price-prompt", "1", "--price-completion", "2",
                               "--runs-dir", str(_runs(tmp_path))], cwd=PROJECT, capture_output=True, text=True,
                              timeout=120)
        assert server.chat_requests() == [] and server.requests == []
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("| ")}
    # n = 100: generate 800 requests, 400,000 + 40,000 tokens, 0.40 + 0.08 money, 2,000 s; label 700, 140,000 +
    # 7,000, 0.14 + 0.014, 1,000 s.
    assert rows["generate-sts-triples"] == ["2 run(s), 40 sources", "800", "400,000", "40,000", "0.48", "33 min"]
    assert rows["label-pairs"] == ["1 run(s), 10 sources", "700", "140,000", "7,000", "0.15", "17 min"]
    assert rows["**total**"] == ["", "1,500", "540,000", "47,000", "0.63", "50 min"]


def test_without_earlier_runs_it_says_so(tmp_path):
    done = subprocess.run([sys.executable, "-m", "flows.cli", "estimate", "--n", "1000", "--model", "m",
                           "--runs-dir", str(tmp_path)], cwd=PROJECT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "No earlier run of m" in done.stdout and "./stsgen generate --n 20" in done.stdout
