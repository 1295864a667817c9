"""tasks/report: the STS protocol on the example STS files (STS-B TSV, a SemEval folder in SentEval's "all"
setting, SICK) with a deterministic bag-of-words encoder, and the run's quality table from hand-made manifests."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from tasks.core.sts_data import read_sts_source
from tasks.core.sts_evaluation import evaluate_sources
from tasks.report.run_quality import quality_markdown, quality_rows
from tests.conftest import PROJECT

EXAMPLES = PROJECT / "data" / "examples"


def bag_of_words(sentences: list[str]) -> np.ndarray:
    """Hashed word counts: a fixed encoder whose cosines the test recomputes by hand."""
    out = np.zeros((len(sentences), 64))
    for i, s in enumerate(sentences):
        for w in s.lower().replace(".", " ").split():
            out[i, sum(map(ord, w)) % 64] += 1
    return out


def spearman_by_hand(frame) -> float:
    a, b = bag_of_words(frame["s1"].tolist()), bag_of_words(frame["s2"].tolist())
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return round(100 * spearmanr(cos, frame["gold"]).statistic, 2)


def test_sts_protocol_on_every_example_format():
    sources = [str(EXAMPLES / "sts-b.tsv"), str(EXAMPLES / "sts-semeval"), str(EXAMPLES / "sick.txt")]
    results = evaluate_sources(bag_of_words, sources)
    for source in sources:
        frame = read_sts_source(source)
        assert results[source]["pairs"] == len(frame) > 0
        assert results[source]["spearman"] == pytest.approx(spearman_by_hand(frame), abs=0.01)
    semeval = results[sources[1]]  # "all" setting: one Spearman over the concatenation, each subset beside it
    frame = read_sts_source(sources[1])
    assert set(semeval["subsets"]) == set(frame["subset"]) and len(semeval["subsets"]) == 2
    captions = frame[frame["subset"] == "captions"]
    assert semeval["subsets"]["captions"] == pytest.approx(spearman_by_hand(captions), abs=0.01)


def test_quality_table_reads_the_stage_manifests():
    manifests = {
        "generate-sts-triples": {"counts": {"triples": 8, "sources": 10, "per_kind": {"positive": {"accepted": 9,
                                                                                                 "attempts": 12}},
                                            "rejected_by_kind": {"negative": {"judge_rejected": 3, "too_long": 1}}},
                                 "llm_stats": {"requests_sent": 40}},
        "label-pairs": {"quality": {"hierarchy": {"rate": 0.625, "triples": 8, "pos_over_neg_rate": 1.0,
                                                  "pos_over_neg_triples": 8}, "gold": None},
                        "labeler": {"method": "llm_rating"}},
        "train-surrogate": {"selection": {"backbone": {"stsb-dev": 86.72}, "surrogate": {"stsb-dev": 87.25},
                                          "shipped_step": 100}},
    }
    table = {(r["stage"], r["measure"]): r["value"] for r in quality_rows(manifests)}
    assert table[("generate", "complete triples / source sentences")] == "8 / 10 (80.0%)"
    assert table[("generate", "LLM requests per complete triple (generation + judge)")] == "5.00"
    assert table[("generate", "negative: verifier rejections")] == "judge_rejected 3"  # rule rejections are not
    assert table[("label", "hierarchy label(a,s+) > label(a,sm) > label(a,s-)")] == "62.5% of 8 triples"
    assert table[("train", "stsb-dev: backbone → surrogate (Spearman ×100)")] == "86.72 → 87.25 (+0.53)"
    assert table[("train", "shipped model")] == "checkpoint of step 100"
    assert "| label | labeler | llm_rating |" in quality_markdown(quality_rows(manifests))
    assert quality_rows({}) == []  # a run that stopped early: no rows for stages it never reached


def test_quality_table_shows_each_label_columns_hierarchy_and_gold():
    columns = {"rating": {"hierarchy": {"rate": 0.75, "pos_over_neg_rate": 1.0}, "gold": None},
               "context_label": {"hierarchy": {"rate": 0.25, "pos_over_neg_rate": 0.5}, "gold": {"spearman": 58.96}},
               "label": {"hierarchy": {"rate": 0.5, "pos_over_neg_rate": 0.875}, "gold": None}}
    manifests = {"label-pairs": {"quality": {"hierarchy": {}, "gold": None, "columns": columns},
                                 "labeler": {"method": "combined", "rating_weight": 0.8}}}
    table = {(r["stage"], r["measure"]): r["value"] for r in quality_rows(manifests)}
    assert table[("label", "rating: hierarchy / a+ > a- / gold Spearman ×100")] == "75.0% / 100.0% / n/a"
    assert table[("label", "context_label: hierarchy / a+ > a- / gold Spearman ×100")] == "25.0% / 50.0% / 59.0"
    assert table[("label", "labeler")] == "combined (0.8·rating/5 + 0.00·TF-IDF cosine + 0.20·context label)"
    manifests["label-pairs"]["labeler"] |= {"rating_weight": 0.5, "tfidf_weight": 0.0, "teacher_weight": 0.5}
    table = {(r["stage"], r["measure"]): r["value"] for r in quality_rows(manifests)}
    assert table[("label", "labeler")] == ("combined (0.5·rating/5 + 0.00·TF-IDF cosine + 0.50·teacher cosine + "
                                           "0.00·context label)")
