"""Best of N's choice, unit by unit (tasks/generate/candidates.py): `rank`'s order per kind, the `Chooser` a run
builds, the pattern targets it aims at, the negative band's ceiling — with hand-set vectors where the order must be
known, the real encoder where the measure is the point (the flow's best of N: test_best_of_n.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tasks.generate.candidates import Chooser, pattern_targets, rank
from tasks.generate.settings import GenerateSettings, SamplingSettings, ValidationSettings
from tasks.generate.stage import chooser_of
from tests.generate.test_best_of_n import ANCHOR, DROPS, KEEPS_CLOSE, KEEPS_FAR


def test_rank_orders_positives_by_fact_errors_then_cosine_and_sts_negatives_farthest_first():
    vectors = {ANCHOR: [1.0, 0.0], KEEPS_CLOSE: [0.9, 0.1], KEEPS_FAR: [0.5, 0.5], DROPS: [1.0, 0.0]}

    def encode(texts):
        return [vectors[t] for t in texts]

    order, _ = rank("positive", ANCHOR, [DROPS, KEEPS_FAR, KEEPS_CLOSE], encode)
    assert order == [2, 1, 0]  # DROPS is the most similar but drops facts: last
    assert rank("negative", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR], encode, "farthest")[0] == [1, 0]
    assert rank("negative", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR], encode, "first")[0] == [0, 1]
    # with the pattern's cosine as target (STS): the nearest to it, not the extreme
    far = "An unrelated sentence about rivers."
    vectors[far] = [0.0, 1.0]  # cosine 0; KEEPS_FAR ≈ 0.71, KEEPS_CLOSE ≈ 0.99
    assert rank("negative", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR, far], encode, "farthest", target=0.6)[0] == [1, 0, 2]
    assert rank("intermediate", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR], encode, target=0.6,
                intermediate_choice="pattern_cosine")[0] == [1, 0]
    assert rank("intermediate", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR], encode)[0] == [0, 1]


def test_intermediates_that_only_leave_details_out_are_chosen_before_rewrites():
    """The default intermediate choice: fewest content words the anchor lacks first, the pattern's cosine second —
    the cosine alone keeps the rewrite, the candidate farthest from the anchor."""
    deletion = "Malaysian police arrested 12 men on Monday."  # adds nothing: the place left out
    shorter = "Police arrested 12 men."  # adds nothing either, leaves out more
    rewrite = "Malaysian officers detained 12 men on Monday."  # 2 words the anchor lacks
    vectors = {ANCHOR: [1.0, 0.0], deletion: [0.95, 0.31], shorter: [0.8, 0.6], rewrite: [0.6, 0.8]}

    def encode(texts):
        return [vectors[t] for t in texts]

    candidates = [rewrite, deletion, shorter]
    by_cosine, cosines = rank("intermediate", ANCHOR, candidates, encode, target=0.6,
                              intermediate_choice="pattern_cosine")
    assert by_cosine[0] == 0 and abs(cosines[0] - 0.6) < 0.01  # the rewrite sits on the target
    by_words, _ = rank("intermediate", ANCHOR, candidates, encode, target=0.6)
    assert by_words == [2, 1, 0]  # both deletions first, nearest the target first; the rewrite last
    # the stage builds its chooser with the run's setting
    cfg = GenerateSettings(sampling=SamplingSettings(candidates=1, intermediate_choice="pattern_cosine"),
                           validation=ValidationSettings(negative_max_cosine=None))
    assert chooser_of(cfg, None).intermediate_choice == "pattern_cosine"
    assert chooser_of(cfg.model_copy(update={"sampling": SamplingSettings(candidates=1)}), None
                      ).intermediate_choice == "fewest_added"


def test_the_chooser_ranks_by_its_pattern_targets():
    """The flow test below sees the targets recorded; this one sees them used: with the middle candidate's cosine as
    the negative's target, the middle one is kept, where the target-less rule keeps the farthest."""
    candidates = [KEEPS_CLOSE, KEEPS_FAR, "A cat sleeps on the warm sofa all afternoon."]
    order, cosines = Chooser().rank("negative", ANCHOR, candidates)
    middle = sorted(range(3), key=lambda i: cosines[i])[1]
    targeted, _ = Chooser(targets=(("negative", cosines[middle]),)).rank("negative", ANCHOR, candidates)
    assert order[0] == min(range(3), key=lambda i: cosines[i]) != middle and targeted[0] == middle


def test_pattern_targets_are_each_kinds_mean_encoder_cosine_and_skip_kinds_without_pairs():
    from sentence_transformers import util

    from tasks.llm.local_models import load_encoder

    pairs = [(ANCHOR, KEEPS_FAR), (ANCHOR, "A cat sleeps on the warm sofa all afternoon.")]
    model = load_encoder("all-minilm-l6-v2")
    cosines = [float(util.cos_sim(model.encode(a), model.encode(b))) for a, b in pairs]  # one pair at a time
    targets = pattern_targets({"intermediate": [(DROPS, DROPS)], "positive": [], "negative": pairs})
    assert [kind for kind, _ in targets] == ["intermediate", "negative"]  # in order; a kind without pairs: no target
    assert dict(targets)["intermediate"] == 1.0  # a sentence with itself
    # rounded to 4 places, batched: within 6e-5 of the pairs' mean one by one (the two cosines are 0.1+ apart)
    assert abs(dict(targets)["negative"] - sum(cosines) / 2) < 6e-5 and cosines[1] < cosines[0] - 0.1
    # recorded in the manifest to 4 places: float noise between machines does not move the choice
    assert dict(targets)["negative"] == round(dict(targets)["negative"], 4)


def test_rank_refuses_an_empty_candidate_list():
    with pytest.raises(ValueError) as err:
        rank("positive", ANCHOR, [], lambda texts: [[1.0, 0.0]] * len(texts))
    assert str(err.value) == "rank() needs at least one candidate"


def test_rank_normalises_whatever_the_encoder_returns():
    """Integer or short vectors (a test double, an encoder without a Normalize layer) are cosines all the same."""
    def encoder(vectors):
        return lambda texts: vectors[:len(texts)]

    # (3, 4) and (0, 5) have norm 5: cosine 1 with itself, 16/20 = 0.8 with the other
    assert rank("positive", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR], encoder([[3, 4], [3, 4], [0, 5]]))[1] == [1.0, 0.8]
    assert rank("positive", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR],
                encoder([[0.3, 0.4], [0.3, 0.4], [0.0, 0.5]]))[1] == [1.0, 0.8]


def test_rank_compares_cosines_to_four_places_so_float_noise_cannot_reorder():
    # cosines 0.50004 and 0.49996: the same to 4 places, so the tie goes to the first candidate
    vectors = [[1.0, 0.0]] + [[c, math.sqrt(1 - c * c)] for c in (0.50004, 0.49996)]
    order, cosines = rank("negative", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR], lambda texts: vectors, "farthest")
    assert cosines == [0.5, 0.5] and order == [0, 1]


class FakeEncoder:
    """The encode() of a SentenceTransformer over fixed vectors; counts the texts it encoded."""

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors, self.encoded = vectors, 0

    def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=False):
        self.encoded += len(texts)
        out = np.asarray([self.vectors[t] for t in texts], dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True) if normalize_embeddings else out


DELETION = "Malaysian police arrested 12 men on Monday."  # adds nothing: the place left out
SHORTER = "Police arrested 12 men."  # adds nothing either, leaves out more
REWRITE = "Malaysian officers detained 12 men on Monday."  # 2 words the anchor lacks
FAKE_VECTORS = {ANCHOR: [1.0, 0.0], KEEPS_CLOSE: [0.9, 0.1], KEEPS_FAR: [0.6, 0.8], DELETION: [0.95, 0.31],
                SHORTER: [0.8, 0.6], REWRITE: [0.6, 0.8]}


@pytest.fixture
def fake_encoder(monkeypatch) -> FakeEncoder:
    fake = FakeEncoder(FAKE_VECTORS)
    monkeypatch.setattr("tasks.generate.candidates.load_encoder", lambda source, device=None: fake)
    return fake


def test_the_chooser_measures_a_lone_candidate_only_for_the_negative_ceiling(fake_encoder):
    """One candidate has nothing to be ranked against: it is measured (its cosine to the anchor) only when it is a
    negative and the run has a negative ceiling to hold it to."""
    assert Chooser().rank("negative", ANCHOR, [KEEPS_FAR]) == ([0], [None])
    assert Chooser().rank("positive", ANCHOR, [KEEPS_FAR]) == ([0], [None])
    assert Chooser(negative_max_cosine=0.9).rank("positive", ANCHOR, [KEEPS_FAR]) == ([0], [None])
    assert Chooser(negative_max_cosine=0.9).rank("negative", ANCHOR, []) == ([], [])
    assert fake_encoder.encoded == 0  # nothing encoded so far
    assert Chooser(negative_max_cosine=0.9).rank("negative", ANCHOR, [KEEPS_FAR]) == ([0], [0.6])


def test_the_chooser_ranks_with_its_own_negative_and_intermediate_choice(fake_encoder):
    assert Chooser(negative_choice="first").rank("negative", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR])[0] == [0, 1]
    assert Chooser().rank("negative", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR])[0] == [1, 0]  # 'farthest', the default
    # the rewrite sits on the target cosine 0.6, the deletions add no words: the default keeps a deletion
    target = (("intermediate", 0.6),)
    candidates = [REWRITE, DELETION, SHORTER]
    assert Chooser(targets=target).rank("intermediate", ANCHOR, candidates)[0] == [2, 1, 0]
    assert Chooser(targets=target, intermediate_choice="pattern_cosine").rank("intermediate", ANCHOR,
                                                                              candidates)[0][0] == 0


def test_a_negative_at_the_ceiling_is_too_close():
    chooser = Chooser(negative_max_cosine=0.5)
    assert chooser.too_close("negative", 0.5) == "cosine to the anchor 0.50 ≥ 0.5: too close for a negative"
    assert chooser.too_close("negative", 0.4999) is None
    assert chooser.too_close("positive", 0.9) is None and Chooser().too_close("negative", 0.99) is None


def test_pattern_targets_are_cosines_whatever_the_encoders_norms(monkeypatch):
    """An encoder folder without a Normalize module returns vectors of any length: the target is asked for unit
    vectors, so a sentence paired with itself is 1 and a pair at right angles is 0."""
    fake = FakeEncoder({"a": [3.0, 4.0], "b": [0.0, 2.0], "c": [-2.0, 0.0]})
    monkeypatch.setattr("tasks.generate.candidates.load_encoder", lambda source, device=None: fake)
    # ("a", "b"): 8 / (5 · 2) = 0.8; ("b", "c"): 0
    assert pattern_targets({"intermediate": [("a", "a"), ("a", "b")], "negative": [("b", "c")]}, "some/folder") == (
        ("intermediate", 0.9), ("negative", 0.0))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not _cuda(), reason="a GPU path: the encoder on CUDA (none here)")
def test_on_a_gpu_the_chooser_and_the_pattern_targets_get_arrays_back_from_the_encoder():
    """On CUDA, sentence-transformers returns GPU tensors unless asked for NumPy: the chooser and the pattern targets
    ask (mutmut's 6 `convert_to_numpy` survivors differ only here)."""
    order, cosines = Chooser().rank("negative", ANCHOR, [KEEPS_CLOSE, KEEPS_FAR, DROPS])
    assert sorted(order) == [0, 1, 2] and all(isinstance(c, float) for c in cosines)
    targets = pattern_targets({"negative": [(ANCHOR, KEEPS_FAR)]})
    assert [kind for kind, _ in targets] == ["negative"] and isinstance(targets[0][1], float)
