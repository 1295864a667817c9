"""Stage-3 scoring through a served LLM (label.lm = an endpoint): against a real llama-cpp-python server running
SmolLM2-135M's Q4 GGUF, the per-(s, c) scores agree with the in-process scorer on the same GGUF (dequantized by
transformers) and the labels rank the same; answers are cached; an endpoint without prompt log-probs is refused
before any shard runs."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.core.config import ConfigError, LLMSettings
from tests.conftest import TOPICS, policy_threads

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m-instruct"
# Mean |served − in-process| per (s, c) of λ2 (a mean token log-prob, nats). llama.cpp multiplies the Q4_1 weights
# with activations quantized to 8 bits and sums in another order, transformers with the dequantized float32
# weights: measured 0.02 mean / 0.09 max on these units (tests/label/test_served_scorer.py, docs/results.md). The
# bounds leave ~2× room; a misaligned token (an off-by-one in the echo) moves a row by ~1–3 nats.
MEAN_TOL, MAX_TOL = 0.05, 0.25
LABEL_TOL = 0.2


def topic_units(n_units: int, n_sentences: int, n_contexts: int):
    """Units of topical sentences, each scored on the same contexts (pairs of consecutive topic sentences). Small:
    llama-cpp-python's echo spends ~80 ms per prompt token sorting the vocabulary (docs/results.md)."""
    from tasks.label.pair_units import Unit

    texts = [s for sentences in TOPICS.values() for s in sentences]
    lefts, rights = texts[0::2][:n_contexts], texts[1::2][:n_contexts]
    units = []
    for k in range(n_units):
        sentences = [texts[(k * 5 + 3 + 4 * i) % len(texts)] for i in range(n_sentences)]
        units.append(Unit(unit_id=f"u{k}", sentence_ids=[f"u{k}s{i}" for i in range(n_sentences)],
                          sentences=sentences, own_contexts=[1] * n_sentences, context_ids=list(range(n_contexts)),
                          left=lefts, right=rights,
                          pairs=[(i, j, "pair", {}) for i in range(n_sentences) for j in range(i + 1, n_sentences)],
                          own_sets=[[i % n_contexts] for i in range(n_sentences)]))
    return units


@pytest.fixture(scope="module")
def smollm2_server():
    from tasks.llm.server import local_server

    # llama-cpp-python: llama.cpp's llama-server does not echo prompt log-probs. A small context: llama-cpp-python
    # turns all n_ctx rows of logits into log-probs for every echo request.
    with local_server(MODEL, n_ctx=64, threads=2, engine="llama-cpp-python") as server:
        yield server


def served_settings(server, tmp_path, **kw):
    from tasks.label.settings import LabelSettings

    return LabelSettings(method="context", lambda_disc=0.0, lm=MODEL,
                         lm_endpoint={"base_url": server.base_url, "model": MODEL, "max_concurrency": 2}, **kw)


def test_served_scores_and_labels_agree_with_the_in_process_scorer(smollm2_server, tmp_path, monkeypatch):
    from tasks.label.labeling import LabelSettings, label_units, lm_log_probs
    from tasks.label.scorer import load_scorer, resolve_lm

    monkeypatch.setenv("STSGEN_HOME", str(tmp_path / "home"))  # a fresh response cache
    # λ2 and λ4 from one request per (s, c): two segments per continuation (s, c>), and the context baseline
    # log p(c> | c<) as a continuation of its own. 3 sentences × 4 contexts, texts cut to 8 tokens.
    units = topic_units(1, 3, 4)
    kw = {"lambda_right": 0.5, "max_segment_tokens": 8}
    served = served_settings(smollm2_server, tmp_path, **kw)
    # the float32 reference: the tolerances are the quantized GGUF's distance from float32
    local = LabelSettings(method="context", lambda_disc=0.0, lm=MODEL, threads=2, dtype="float32", **kw)
    scorer = load_scorer(served, *map(str, resolve_lm(served)))
    assert scorer.prompt_form == "text"  # llama-cpp-python's server takes string prompts only
    lm = load_scorer(local, *map(str, resolve_lm(local)))
    policy_threads()  # `threads=2` set torch's threads as the model loaded: the suite's policy back
    remote, inproc = lm_log_probs(scorer, units, served), lm_log_probs(lm, units, local)
    assert set(remote[0]) == set(inproc[0]) == {"lm_sentence", "lm_right", "lm_right_baseline"}
    for term in remote[0]:
        diff = np.abs(remote[0][term] - inproc[0][term])
        assert diff.mean() < MEAN_TOL and diff.max() < MAX_TOL, (term, diff.mean(), diff.max())
    assert scorer.client.stats.requests_sent == 4 * (3 + 1) + 0  # one per continuation; the probe has its own client
    rows, _, _ = label_units(units, served, None, scorer)  # every answer from the response cache: nothing sent
    assert scorer.client.stats.requests_sent == 16 and scorer.client.stats.cache_hits == 16
    local_rows, _, _ = label_units(units, local, None, lm)
    labels, expected = np.array([r["label"] for r in rows]), np.array([r["label"] for r in local_rows])
    # Labels of 4-context rows move most with a score difference (centring divides by a small spread); the labels'
    # rank agreement at the labeler's real sizes is measured in benchmarks/scorer.py.
    assert len(labels) == 3 and np.abs(labels - expected).max() < LABEL_TOL, (labels, expected)


def test_an_endpoint_without_prompt_logprobs_is_refused_with_one_clear_error(scripted, tiny_lm_dir):
    from tasks.label.settings import LabelSettings
    from tasks.llm.served_lm import served_lm

    settings = LabelSettings(method="context", lm=str(tiny_lm_dir),
                             lm_endpoint={"base_url": scripted.base_url, "model": "scripted-model"})
    with pytest.raises(ConfigError, match=r"returns no prompt log-probs.*echo=true and logprobs"):
        served_lm(settings.lm_endpoint, tiny_lm_dir, "bos")
    assert scripted.text_requests and scripted.text_requests[0]["echo"] is True


def test_endpoint_settings_need_a_tokenizer_and_keep_the_url_out_of_the_score_key(tiny_lm_dir):
    from tasks.core.config import key_fields
    from tasks.label.scorer import resolve_lm
    from tasks.label.settings import LabelSettings

    with pytest.raises(ValueError, match="label.lm is a URL: put the scoring endpoint in label.lm_endpoint"):
        LabelSettings(lm="http://127.0.0.1:9/v1")
    a = LabelSettings(lm=str(tiny_lm_dir), lm_endpoint={"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    b = LabelSettings(lm=str(tiny_lm_dir), lm_endpoint={"base_url": "http://10.0.0.1:8000/v1", "model": "m"})
    c = LabelSettings(lm=str(tiny_lm_dir), lm_endpoint={"base_url": "http://127.0.0.1:9/v1", "model": "other"})
    assert resolve_lm(a)[1] == resolve_lm(b)[1] != resolve_lm(c)[1]
    assert key_fields(a) == key_fields(b) != key_fields(c)  # the URL in no key, the served model in every one
    assert resolve_lm(a)[0] == tiny_lm_dir


def test_api_key_for_the_scoring_endpoint_comes_from_its_env_var(monkeypatch, tiny_lm_dir):
    from tasks.label.settings import LabelSettings
    from tasks.llm.endpoint import api_key

    monkeypatch.setenv("STSGEN_LM_API_KEY", "sk-scoring")
    llm = LabelSettings(lm=str(tiny_lm_dir), lm_endpoint={"base_url": "http://127.0.0.1:9/v1", "model": "m"}).lm_endpoint
    assert isinstance(llm, LLMSettings) and api_key(llm) == "sk-scoring" and "sk-scoring" not in llm.model_dump_json()


def test_the_endpoint_url_goes_into_no_description_or_key(tiny_lm_dir):
    from tasks.core.config import key_fields
    from tasks.label.label_quality import labeler_description
    from tasks.label.scorer import lm_public
    from tasks.label.settings import LabelSettings

    settings = LabelSettings(method="context", lm=str(tiny_lm_dir),
                             lm_endpoint={"base_url": "https://user:s3cret@gpu.example:8000/v1", "model": "m"})
    assert lm_public(settings) == "endpoint (remote): m"
    assert "s3cret" not in str(labeler_description(settings)) and "s3cret" not in str(key_fields(settings))
    loopback = LabelSettings(method="context", lm=str(tiny_lm_dir),
                             lm_endpoint={"base_url": "http://127.0.0.1:8000/v1", "model": "m"})
    assert lm_public(loopback) == "endpoint (loopback): m"
