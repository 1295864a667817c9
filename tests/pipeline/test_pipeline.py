"""The sts-pipeline parent flow: generate → retrieve → label on a tiny corpus against the scripted LLM server; a
re-run reuses every stage, and a label-only change recomputes only the label stage."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.core.config import CorpusSettings, LLMSettings
from tasks.core.store import sha256_path
from tasks.generate.settings import SamplingSettings, VerifierSettings
from tasks.label.settings import LabelSettings
from tasks.report.pattern_report import match_error_rates
from tasks.retrieve.retrieval import SelectionSettings
from tasks.retrieve.settings import RetrieveSettings
from tests.conftest import generate_settings, latest_artifacts
from tests.retrieve.test_retrieval import SMALL_MODEL


def tiny_pipeline_kwargs(base_url: str, work: Path, topic_corpus: Path, tiny_lm_dir: Path, tiny_encoder_dir: Path,
                         llm: dict | None = None, **label_kw) -> dict:
    """sts-pipeline parameters for 5 sources of the topic corpus, tiny models, LLM cache and outputs under `work`
    (shared with the fault-injection suite, which runs the same pipeline in subprocesses); `label_kw`: more
    LabelSettings fields."""
    from tasks.dataset.settings import DatasetSettings
    from tasks.train.backbones import BackboneSettings
    from tasks.train.settings import TrainSettings

    return dict(
        # The fault suite counts requests per stage; the verifier is tested in test_verification.py and below, best
        # of N in tests/generate/test_best_of_n.py.
        generate=generate_settings(topic_corpus, n=5, verifier=VerifierSettings(judge=False),
                                   sampling=SamplingSettings(candidates=1)),
        retrieve=RetrieveSettings(corpora=[CorpusSettings(source=str(topic_corpus))], coherence=SMALL_MODEL,
                                  selection=SelectionSettings(screen_k=50, contexts_per_sentence=3)),
        # Context labels (shards, resume points); the LLM rating labeler is tested in test_labeling.py.
        label=LabelSettings(method="context", lm=str(tiny_lm_dir), contexts_per_sentence=3, reference_sentences=4,
                            **label_kw),
        # the recipe (triples, the pairs' CoSENT regression, the backbone anchor) at a tiny size
        train=TrainSettings(backbone=BackboneSettings(source=str(tiny_encoder_dir)), steps=4, eval_every=2,
                            batch_size=4, dev_pairs=20),
        # The n-gram checks (the tiny encoder's cosines are meaningless; the embedding checks: test_build_dataset.py).
        dataset=DatasetSettings(paraphrase_cosine=None, eval_cosine=None),
        llm=LLMSettings(base_url=base_url, model="scripted-model", cache_path=str(work / "llm.sqlite"), **(llm or {})),
        output_dir=str(work / "out"))


def run_pipeline(server, topic_corpus, tmp_path, tiny_lm_dir, tiny_encoder_dir, **label_kw):
    from flows.sts_pipeline import sts_pipeline

    return sts_pipeline(**tiny_pipeline_kwargs(server.base_url, tmp_path, topic_corpus, tiny_lm_dir, tiny_encoder_dir,
                                               **label_kw))


def stamps(outputs: dict) -> dict[str, int]:
    return {stage: Path(paths["manifest"]).stat().st_mtime_ns for stage, paths in outputs.items()}


def test_pipeline_chains_stages_and_reuses_unchanged_ones(prefect_harness, scripted, topic_corpus, tmp_path,
                                                          tiny_lm_dir, tiny_encoder_dir):
    first = run_pipeline(scripted, topic_corpus, tmp_path, tiny_lm_dir, tiny_encoder_dir)
    assert set(first) == {"generate-sts-triples", "retrieve-contexts", "label-pairs", "report-patterns",
                          "build-dataset", "train-surrogate"}
    triples = pq.read_table(first["generate-sts-triples"]["triples"])
    pairs = pq.read_table(first["label-pairs"]["pairs"]).to_pandas()
    assert triples.num_rows == 5
    # Each stage read the previous stage's output: the manifests record it by content hash.
    retrieve = json.loads(Path(first["retrieve-contexts"]["manifest"]).read_text())
    label = json.loads(Path(first["label-pairs"]["manifest"]).read_text())
    assert retrieve["inputs"][0]["path"] == first["generate-sts-triples"]["triples"]
    assert {i["role"]: i["path"] for i in label["inputs"]} == {
        "triples": first["generate-sts-triples"]["triples"], "contexts": first["retrieve-contexts"]["contexts"]}
    assert set(pairs["triple_id"]) <= set(triples.column("source_id").to_pylist()) and len(pairs) > 0
    # Stage 4 trained on the dataset version of this run (a plain output_dir: the run alone), built from the run's
    # triples and pairs by content.
    dataset = json.loads(Path(first["build-dataset"]["manifest"]).read_text())
    assert [(r["triples_sha256"], r["pairs_sha256"]) for r in dataset["runs"]] == [
        (sha256_path(Path(first["generate-sts-triples"]["triples"])), sha256_path(Path(first["label-pairs"]["pairs"])))]
    assert dataset["runs"][0]["labeler"] == label["labeler"] and label["labeler"]  # how its pairs were labeled
    train = json.loads(Path(first["train-surrogate"]["manifest"]).read_text())
    assert {i["role"]: i["path"] for i in train["inputs"]} == {
        "triples": first["build-dataset"]["triples"], "pairs": first["build-dataset"]["pairs"]}
    # The pattern report measured every relation of the 5 triples with the run's backbone (the tiny encoder).
    report = json.loads(Path(first["report-patterns"]["report"]).read_text())
    assert {r: d["pairs"] for r, d in report["distances"].items()} == dict.fromkeys(
        ("positive", "intermediate", "negative"), 5)
    assert report["values"]["negative"]["generated"]["mer"] == pytest.approx(match_error_rates(
        triples.column("anchor").to_pylist(), triples.column("negative").to_pylist()), abs=1e-4)
    # The cosines are the backbone's on the Parquet's sentences; the distance is the Wasserstein of the stored values.
    from scipy.stats import wasserstein_distance
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(tiny_encoder_dir), device="cpu")
    a, n = (encoder.encode(triples.column(c).to_pylist(), normalize_embeddings=True) for c in ("anchor", "negative"))
    assert report["values"]["negative"]["generated"]["cosine"] == pytest.approx((a * n).sum(1), abs=1e-3)
    neg = report["values"]["negative"]
    assert report["distances"]["negative"]["mer_wasserstein"] == pytest.approx(
        wasserstein_distance(neg["generated"]["mer"], neg["stsb"]["mer"]), abs=1e-3)
    patterns = json.loads(Path(first["report-patterns"]["manifest"]).read_text())
    assert patterns["distances"] == report["distances"] and patterns["inputs"][1]["path"] == str(tiny_encoder_dir)
    plot = Path(first["report-patterns"]["plot"])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and patterns["outputs"]["pattern_complexity.png"]
    # The run's quality table, in the UI: the hierarchy and the surrogate-vs-backbone rows from the manifests; the
    # pattern plot as an image artifact (the PNG itself, inline).
    artifacts = latest_artifacts()
    assert artifacts["patterns-complexity"].type == "image"
    assert base64.b64encode(plot.read_bytes()).decode() in artifacts["patterns-complexity"].data
    quality = artifacts["pipeline-quality"].data
    hierarchy = label["quality"]["hierarchy"]
    assert f"{hierarchy['pos_over_neg_rate']:.1%} of {hierarchy['pos_over_neg_triples']} triples" in quality
    assert "stsb-dev: backbone → surrogate" in quality and "(a, negative) vs STS-B dev" in quality
    requests, before = len(scripted.chat_requests()), stamps(first)

    again = run_pipeline(scripted, topic_corpus, tmp_path, tiny_lm_dir, tiny_encoder_dir)
    assert stamps(again) == before and len(scripted.chat_requests()) == requests

    changed = run_pipeline(scripted, topic_corpus, tmp_path, tiny_lm_dir, tiny_encoder_dir, lambda_disc=0.5)
    after = stamps(changed)
    assert after["generate-sts-triples"] == before["generate-sts-triples"]
    assert after["retrieve-contexts"] == before["retrieve-contexts"]
    assert after["label-pairs"] != before["label-pairs"]
    assert after["train-surrogate"] != before["train-surrogate"]  # trained on the new labels
    assert json.loads(Path(changed["label-pairs"]["manifest"]).read_text())["lambdas"]["disc"] == 0.5


def test_pipeline_trains_on_every_finished_run_beside_it(prefect_harness, scripted, topic_corpus, tmp_path,
                                                         tiny_lm_dir, tiny_encoder_dir):
    """A versioned run's stage 4 trains on the dataset of the finished runs in its output_dir and itself (a scheduled
    pipeline grows its model's data); an unfinished run beside it is left out."""
    from flows.generate_sts_triples import generate_sts_triples
    from flows.sts_pipeline import sts_pipeline

    kwargs = tiny_pipeline_kwargs(scripted.base_url, tmp_path, topic_corpus, tiny_lm_dir, tiny_encoder_dir)
    out, generate = kwargs["output_dir"], kwargs["generate"]
    for name, seed in (("earlier", 101), ("broken", 102)):
        generate_sts_triples(settings=generate.model_copy(update={"seed": seed}), llm=kwargs["llm"], output_dir=out,
                             run=name)
    run_file = Path(out) / "broken" / ".run.json"  # killed after its stage 1: not finished
    run_file.write_text(json.dumps(json.loads(run_file.read_text()) | {"status": "failed"}))
    kwargs["generate"] = generate.model_copy(update={"avoid_used_sources": True})
    outputs = sts_pipeline(**kwargs, run="now")
    dataset = Path(outputs["build-dataset"]["dataset"])
    assert dataset.parent == Path(out) / "now" / "build-dataset"
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert [r["run"] for r in manifest["runs"]] == ["earlier", "now"]  # not "broken"
    triples = pq.read_table(dataset / "triples.parquet").to_pandas()
    earlier = pq.read_table(Path(out) / "earlier" / "generate-sts-triples" / "triples.parquet").to_pandas()
    assert set(earlier["source_id"]) <= set(triples["source_id"]) and set(triples["run"]) == {"earlier", "now"}
    train = json.loads(Path(outputs["train-surrogate"]["manifest"]).read_text())
    assert [i["sha256"] for i in train["inputs"] if i["role"] == "triples"] == [
        manifest["outputs"]["triples.parquet"]["sha256"]]
    assert train["counts"]["train_triples"] + train["counts"]["heldout_triples"] == len(triples)
    # the recipe: the accumulated dataset's labeled pairs in the CoSENT regression, the backbone anchored
    assert [i["sha256"] for i in train["inputs"] if i["role"] == "pairs"] == [
        manifest["outputs"]["pairs.parquet"]["sha256"]]
    assert 0 < train["counts"]["train_pairs"] <= pq.read_metadata(dataset / "pairs.parquet").num_rows
    losses = train["parameters"]["losses"]
    assert (losses["regression"], losses["regression_loss"], losses["backbone_anchor"]) == (1.0, "cosent", 50.0)


def test_default_pipeline_runs_the_cards_dag_with_rating_and_context_labels(prefect_harness, topic_corpus, tmp_path,
                                                                           tiny_lm_dir, tiny_encoder_dir):
    """The defaults (judge on, label.method = combined) end to end: every triple carries the judge's verdicts; the
    pipeline runs generate → retrieve-contexts → label-pairs → report-patterns (the design card's DAG); every pair
    carries the rater's expected digit (`rating`), its context-vector label (`context_label`) and their mix (`label`)
    with the weight the manifest names; the quality has each column's hierarchy rate."""
    from flows.sts_pipeline import sts_pipeline
    from tasks.llm.scripted_server import ScriptedOpenAI, default_responder, is_judge_request
    from tests.label.test_labeling import _overlap_rating

    def responder(messages, body):  # rating requests: a digit; generation and judge requests: the defaults
        return "3" if body.get("logprobs") and not is_judge_request(messages) else default_responder(messages, body)

    def logprobs(messages, body):
        return [] if is_judge_request(messages) else _overlap_rating(messages, body)  # judge: from the text

    with ScriptedOpenAI(responder=responder, logprobs=logprobs) as server:
        kwargs = tiny_pipeline_kwargs(server.base_url, tmp_path, topic_corpus, tiny_lm_dir, tiny_encoder_dir)
        label = LabelSettings(lm=str(tiny_lm_dir), contexts_per_sentence=3, candidates_per_sentence=3,
                              reference_sentences=4)
        assert label.method == LabelSettings().method == "combined"
        generate = kwargs["generate"].model_copy(update={"verifier": VerifierSettings()})
        outputs = sts_pipeline(**kwargs | {"generate": generate, "label": label, "train": None})
        rated = [r for r in server.requests if "Sentence 1:" in r["body"]["messages"][-1]["content"]]
    assert list(outputs) == ["generate-sts-triples", "retrieve-contexts", "label-pairs", "report-patterns"]
    triples = pq.read_table(outputs["generate-sts-triples"]["triples"]).to_pandas()
    assert len(triples) and (triples["negative_judge_p_pass"] == 1.0).all() and (triples["judge_model"] != "").all()
    pairs = pq.read_table(outputs["label-pairs"]["pairs"]).to_pandas()
    assert len(pairs) and len(rated) >= len(pairs)
    assert pairs["rating"].notna().all() and pairs["context_label"].notna().all()
    manifest = json.loads(Path(outputs["label-pairs"]["manifest"]).read_text())
    w, t = manifest["labeler"]["rating_weight"], manifest["labeler"]["tfidf_weight"]
    assert manifest["labeler"]["method"] == "combined" and 0 < w < 1 and 0 < t < 1 - w
    # The default similarity ('contrast') is a share of contexts, on 0–1 already: it enters the mix as it is, with
    # the weight the rating (on 0–5) and the TF-IDF cosine leave.
    assert label.similarity == "contrast" and pairs["context_label"].between(0, 1).all()
    expected = w * pairs["rating"] / 5 + t * pairs["tfidf_cosine"] + (1 - w - t) * pairs["context_label"]
    assert (pairs["label"] - expected).abs().max() < 1e-9
    assert set(manifest["quality"]["columns"]) == {"rating", "context_label", "tfidf_cosine", "label"}
    assert all("rate" in q["hierarchy"] for q in manifest["quality"]["columns"].values())
    import datasets  # the run's tables were exported as Hugging Face datasets, rows as in the Parquet

    saved = datasets.load_from_disk(str(tmp_path / "out" / "label-pairs" / "hf" / "pairs"))
    assert saved["sentence1"] == pairs["s1"].tolist() and saved["score"] == pytest.approx(pairs["label"].tolist())
    assert (tmp_path / "out" / "generate-sts-triples" / "hf" / "triples" / "README.md").is_file()


def test_match_error_rate_on_hand_computed_pairs():
    # "the cat sat on the mat" → "a cat sat on mat": 1 substitution (the→a), 1 deletion (the), 4 hits: 2 / 6.
    mer = match_error_rates(["The cat sat on the mat.", "A man is running.", "Birds fly."],
                            ["a cat sat on mat", "A man is running", "Fish swim."])
    assert mer == pytest.approx([2 / 6, 0.0, 1.0])
