"""The in-process llama.cpp scorer (label.scorer = 'llama_cpp'): SmolLM2-135M's GGUF scored by llama-cpp-python
agrees with the transformers scorer on the same file, and a group's prefix evaluated once (the cache rolled back
between continuations) gives the same scores as each continuation evaluated from scratch."""

from __future__ import annotations

import numpy as np
import pytest

from models.causal_lm import Group
from tests.conftest import policy_threads
from tests.label.test_served_scorer import MAX_TOL, MEAN_TOL, MODEL, topic_units

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scorers():
    from tasks.label.labeling import LabelSettings
    from tasks.label.scorer import load_scorer, resolve_lm

    reference = LabelSettings(method="context", lambda_disc=0.0, lm=MODEL, threads=2, scorer="transformers",
                              dtype="float32")
    fast = reference.model_copy(update={"scorer": "llama_cpp"})
    loaded = (load_scorer(reference, *map(str, resolve_lm(reference))), load_scorer(fast, *map(str, resolve_lm(fast))))
    policy_threads()  # `threads=2` set torch's threads as the model loaded: the suite's policy back
    return (*loaded, fast)


def test_llama_cpp_scores_agree_with_transformers(scorers):
    from tasks.label.labeling import lm_log_probs

    reference, fast, settings = scorers
    units = topic_units(n_units=2, n_sentences=3, n_contexts=4)
    want = [t["lm_sentence"] for t in lm_log_probs(reference, units, settings)]
    got = [t["lm_sentence"] for t in lm_log_probs(fast, units, settings)]
    diff = np.abs(np.concatenate([g - w for g, w in zip(got, want)]).ravel())
    assert diff.mean() < MEAN_TOL and diff.max() < MAX_TOL
    assert np.corrcoef(np.concatenate(got).ravel(), np.concatenate(want).ravel())[0, 1] > 0.98


def test_a_shared_prefix_scores_like_each_continuation_alone(scorers):
    _, fast, _ = scorers
    prefix = fast.start_ids + fast.encode(["The river flooded the town."], 48)[0]
    continuations = [[fast.encode([" Residents moved their cattle."], 48)[0]],
                     [fast.encode([" The orchestra played."], 48)[0], fast.encode([" Critics praised it."], 48)[0]],
                     [fast.encode([" Rain fell for days."], 48)[0]]]
    shared = fast.score([Group(prefix, continuations)])[0]
    for c, cont in enumerate(continuations):
        alone = fast.score([Group(prefix, [cont])])[0]
        assert alone[0][0, : len(cont)] == pytest.approx(shared[0][c, : len(cont)], abs=1e-4)
        assert (alone[1][0, : len(cont)] == shared[1][c, : len(cont)]).all()
    assert shared[0][1, 1] < 0 and shared[1][1, 1] == len(continuations[1][1])


def test_the_llama_cpp_scorer_refuses_a_transformers_folder(tiny_lm_dir):
    from tasks.label.labeling import LabelSettings
    from tasks.label.scorer import load_scorer

    settings = LabelSettings(method="context", lm=str(tiny_lm_dir), scorer="llama_cpp")
    with pytest.raises(ValueError, match="reads a .gguf file"):
        load_scorer(settings, str(tiny_lm_dir), "sha")
