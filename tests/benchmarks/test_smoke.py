"""Every kept benchmark that runs cheaply, run on tiny data: a scripted LLM server, a three-document corpus, a few
STS-B dev rows, the smallest sizes. What is not here (it needs a real model, a compile or minutes of training) is
listed in benchmarks/README.md."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.conftest import PROJECT, SHARED_DATA, generate_settings

pytestmark = pytest.mark.filterwarnings("ignore")


def run(monkeypatch, capsys, module: str, *argv) -> str:
    """`python -m benchmarks.<module> argv…` in this process; its printed output."""
    main = importlib.import_module(f"benchmarks.{module}").main
    monkeypatch.setattr(sys, "argv", [module, *map(str, argv)])
    main()
    return capsys.readouterr().out


@pytest.fixture
def few_stsb(monkeypatch):
    """STS-B dev cut to 40 pairs (every score band) wherever a benchmark reads it."""
    from tasks.core.sts_data import read_stsb

    frame = read_stsb("dev").sample(40, random_state=0)

    def patch(module: str, n: int = 40):
        monkeypatch.setattr(importlib.import_module(f"benchmarks.{module}"), "read_stsb", lambda split: frame.head(n))
    return patch


@pytest.fixture
def committed_run(tmp_path):
    """A run folder holding 6 triples of a committed main-job run (benchmarks/data)."""
    folder = tmp_path / "run" / "generate-sts-triples"
    folder.mkdir(parents=True)
    table = pq.read_table(PROJECT / "benchmarks" / "data" / "data_value_triples_mainjob.parquet").slice(0, 6)
    pq.write_table(table, folder / "triples.parquet")
    return folder.parent


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory, prefect_harness):
    """A stage-1 run folder (`<run>/generate-sts-triples`) of 4 sources from the scripted server."""
    from flows.generate_sts_triples import generate_sts_triples
    from tasks.core.config import LLMSettings
    from tasks.llm.scripted_server import ScriptedOpenAI
    from tests.conftest import write_tiny_corpus

    root = tmp_path_factory.mktemp("scripted-run")
    with ScriptedOpenAI() as server:
        paths = generate_sts_triples(settings=generate_settings(write_tiny_corpus(root), n=4),
                                     llm=LLMSettings(base_url=server.base_url, model="scripted-model",
                                                     cache_path=str(root / "llm.sqlite")),
                                     output_dir=str(root / "out"))
    return Path(paths["triples"]).parents[1]


def test_blind_reading_prepares_a_reading_and_scores_it(committed_run, tmp_path, monkeypatch, capsys):
    reading, key = tmp_path / "reading.csv", tmp_path / "key.csv"
    run(monkeypatch, capsys, "blind_reading", "prepare", "--before", committed_run, "--after", committed_run, "--k", 2,
        "--out", reading, "--key", key)
    rows = pd.read_csv(reading)
    assert len(rows) == 2 and (pd.read_csv(key)["runs"] == "before+after").all()  # the same triple is read once
    rows[["positive_sts4", "positive_every_fact", "intermediate_verdict", "negative_verdict"]] = "good"
    rows.to_csv(reading, index=False)
    out = run(monkeypatch, capsys, "blind_reading", "score", reading, key)
    assert "2/2 (100%" in out


@pytest.mark.slow  # a stage-1 flow run: 40–100 s on 2 busy cores, most of it Prefect's start
def test_verifier_samples_a_run_for_reading(scripted_run, tmp_path, monkeypatch, capsys):
    folder = scripted_run / "generate-sts-triples"
    out = run(monkeypatch, capsys, "verifier", "sample", folder, "--k", 2, "--out", tmp_path / "gen.csv")
    assert "generations" in out and set(pd.read_csv(tmp_path / "gen.csv")["kind"]) == {"positive", "intermediate",
                                                                                       "negative"}
    out = run(monkeypatch, capsys, "verifier", "triples", folder, "--k", 2, "--out", tmp_path / "t.csv",
              "--exclude", tmp_path / "none.csv")
    assert len(pd.read_csv(tmp_path / "t.csv")) == 2


def test_verifier_scores_the_committed_readings(monkeypatch, capsys):
    labels = PROJECT / "data" / "annotations"
    out = run(monkeypatch, capsys, "verifier", "score", labels / "verifier_generations.csv", "--ordering", "0.0")
    assert "| LLM judge (P(pass) < 0.5) | all | 90 |" in out and "ordering (MiniLM, margin 0.0)" in out
    assert "| positive |" in run(monkeypatch, capsys, "verifier", "triples-score", labels / "triples_reading_check.csv")


def test_verifier_signals_cv_compares_the_signals(tmp_path, monkeypatch, capsys):
    from tests.generate.test_verifier_fit import tiny_signals

    table = pd.read_csv(tiny_signals(tmp_path / "s.csv"))
    for name in ("same", "b_in_a", "rating"):
        table[name] = table["judge"]
    table.to_csv(tmp_path / "s.csv", index=False)
    out = run(monkeypatch, capsys, "verifier", "signals-cv", tmp_path / "s.csv", "--folds", 2)
    assert "| negative | 4 | 2 | combined: stage-1 signals (no extra request) |" in out


def test_verifier_signals_asks_the_scripted_server(tmp_path, monkeypatch, capsys):
    from tasks.llm.scripted_server import ScriptedOpenAI

    labels = pd.read_csv(PROJECT / "data" / "annotations" / "verifier_generations.csv").groupby("kind").head(1)
    labels.to_csv(tmp_path / "labels.csv", index=False)
    monkeypatch.setenv("STSGEN_HOME", str(tmp_path / "home"))  # its own response cache
    with ScriptedOpenAI(logprobs=lambda messages, body: [("yes", -0.1), ("no", -2.4), ("3", -0.2), ("4", -1.7)]) \
            as server:
        run(monkeypatch, capsys, "verifier", "signals", tmp_path / "labels.csv", "--base-url", server.base_url,
            "--model", "scripted-model", "--out", tmp_path / "signals.csv")
    signals = pd.read_csv(tmp_path / "signals.csv")
    assert len(signals) == 3 and signals[["cosine", "dropped", "added", "length"]].notna().all().all()


def test_label_hierarchy_reads_a_label_pairs_output(monkeypatch, capsys):
    out = run(monkeypatch, capsys, "label_hierarchy", PROJECT / "benchmarks" / "data" / "label_pairs_mainjob.parquet")
    assert "rating" in out and "label" in out


def test_data_value_plot_draws_the_committed_curves(tmp_path, monkeypatch, capsys):
    table = PROJECT / "benchmarks" / "results" / "data_value_minilm_cpu.csv"
    run(monkeypatch, capsys, "data_value_plot", "--out", tmp_path / "curves.png", f"{table}=86.72")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_pattern_distances_of_a_run(committed_run, few_stsb, monkeypatch, capsys):
    few_stsb("pattern_distances")
    out = run(monkeypatch, capsys, "pattern_distances", committed_run, "--common")
    assert "| run | negative | 6 |" in out and "| run | 6 |" in out


def test_encoder_precision_on_a_few_sentences(few_stsb, monkeypatch, capsys):
    few_stsb("encoder_precision", 6)
    out = run(monkeypatch, capsys, "encoder_precision", "--repeat", 1, "--batch", 8)
    assert "12 texts" in out and "cosine(float32, bf16)" in out


@pytest.mark.slow  # a stage-1 flow with retried faults: ~50 s on 2 busy cores
def test_load_accounts_for_every_source_under_injected_faults(tiny_corpus, prefect_harness, monkeypatch, capsys):
    import benchmarks.load

    monkeypatch.setattr(benchmarks.load, "GenerateSettings",
                        lambda n, batch_size: generate_settings(tiny_corpus, n=n, batch_size=batch_size))
    out = run(monkeypatch, capsys, "load", "--n", 3, "--fault-rate", 0.2, "--concurrency", 2)
    assert "| every source accounted for (triple or quarantine rows) | True |" in out
    assert "| client-counted attempts = server-received attempts | True |" in out


@pytest.mark.slow  # a stage-1 flow and a plain loop: ~60 s on 2 busy cores
def test_generation_part_a_flow_against_a_plain_loop(tiny_corpus, prefect_harness, monkeypatch, capsys):
    import benchmarks.generation
    from tasks.core.config import CorpusSettings

    monkeypatch.setattr(benchmarks.generation, "CorpusSettings", lambda: CorpusSettings(source=str(tiny_corpus)))
    monkeypatch.setattr(benchmarks.generation, "GenerateSettings",
                        lambda **fields: generate_settings(tiny_corpus, **fields))
    out = run(monkeypatch, capsys, "generation", "--part", "a", "--n", 3, "--concurrency", 2)
    assert "plain sequential openai loop: 9 requests" in out and "ratio flow/plain" in out


@pytest.mark.skipif(not (SHARED_DATA / "sick2014").is_dir(), reason="../shared/data (these machines only)")
def test_held_out_pairs_read_in_place():
    from benchmarks.held_out import held_out_pairs

    frame = held_out_pairs("sick-trial")
    assert len(frame) > 100 and {"s1", "s2", "gold"} <= set(frame.columns)


@pytest.mark.slow  # loads and evaluates all-MiniLM-L6-v2 three times, trains two rows 2 steps: ~2 min on 2 busy cores
# (tests/benchmarks/test_data_value.py tests what the harness chooses on, with the trainer scripted: seconds)
def test_data_value_trains_two_rows_on_committed_triples(few_stsb, tmp_path, monkeypatch, capsys):
    import benchmarks.data_value
    from benchmarks.data_value_columns import POOL, SICK, TEST
    from tasks.core.sts_data import read_stsb

    few_stsb("data_value", 16)
    small = read_stsb("test").head(16)
    monkeypatch.setattr(benchmarks.data_value, "held_out_sets", lambda: {SICK: small, TEST: small, POOL: small})
    table = tmp_path / "rows.csv"
    out = run(monkeypatch, capsys, "data_value", "--runs",
              PROJECT / "benchmarks" / "data" / "data_value_triples_mainjob.parquet", "--sizes", 4, "--seeds", 13,
              "--data", "simcse,triples", "--steps", 2, "--batch-size", 4, "--device", "cpu", "--table-out", table)
    rows = pd.read_csv(table)
    assert list(rows["data"]) == ["backbone", "simcse", "triples"] and list(rows["anchors"]) == [0, 4, 4]
    assert (rows["best_step"].iloc[1:] > 0).all() and rows[POOL].notna().all()  # trained rows: trained weights
    assert "STS-B test" in out


@pytest.mark.slow  # three dataset versions; the cold one encodes STS-B dev + test (5.4k sentences): ~1.5 min
def test_dataset_build_times_builds_of_synthetic_runs(tiny_corpus, tmp_path, monkeypatch, capsys):
    import benchmarks.dataset_build
    from tasks.core.config import CorpusSettings
    from tasks.corpus.sentences import load_corpus

    sentences = load_corpus(CorpusSettings(source=str(tiny_corpus))).usable["text"].drop_duplicates().tolist()
    monkeypatch.setattr(benchmarks.dataset_build, "corpus_sentences", lambda: sentences)
    monkeypatch.setenv("STSGEN_HOME", str(tmp_path / "home"))  # the benchmark points it at its own; restored after
    out = run(monkeypatch, capsys, "dataset_build", "timing", "--runs", 2, "--triples", 5, "--subset", 10,
              "--flagged-out", tmp_path / "flagged.csv")
    assert "| cold (empty encoder cache) | 2 |" in out and "LSH recall" in out
    assert "verdict" in pd.read_csv(tmp_path / "flagged.csv").columns
