"""Stage 3 work: context scores S(s, c) and context-vector similarity labels (Sun et al. 2022, Eq. 3–4).

S(s, c) = λ1·log p_disc(y=1 | c<, s, c>) + λ2·(1/|s|)·log p(s | c<) + λ3·(1/|c<|)·log p(c< | s, c>)
          + λ4·(1/|c>|)·log p(c> | c<, s)

- p_disc: the stage-2 coherence model (log-sigmoid of its logit: a frozen encoder's head, or the BiLSTM).
- λ2, λ4: a causal LM reading c< s c> left to right. The paper's λ2 term conditions on c> too; a left-to-right model
  cannot, so λ2 uses log p(s | c<) (docs/results.md). Both terms come from one pass per (s, c), with the c< prefix
  run once per context and its key/value cache shared by every sentence scored against it.
- λ3: approximated by reading s, then c>, then c< (the prefix is s, shared by all contexts); off by default (λ3 = 0)
  because it costs a second pass for a reversed reading order the LM never saw in training.
|s|, |c<|, |c>| count LM tokens. A term whose λ is 0 is not computed.

A *unit* is a set of sentences scored over the union of their context sets once (a triple's four sentences, or the
two sentences of a pair); every pair inside it is labeled from that one score matrix:
v_s = [S(s, c) for c in C], label(s1, s2) = cosine(v_s1, v_s2), with v centred first by default (then the cosine is
the Pearson correlation of the two rows: it compares how the sentences' fit varies across contexts, not the
sentences' overall likelihood, which otherwise puts every raw cosine near 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from prefect import task
from prefect.cache_policies import NO_CACHE

from models.causal_lm import CausalLM, Group, TokenizedLM
from tasks.contracts import TrainedCoherence, load_trained_cached
from tasks.core.config import ConfigError
from tasks.core.device import resolve_device, resolve_lm_dtype, scaled_batch
from tasks.core.shards import commit_shard, finished_shard
from tasks.core.store import read_manifest
from tasks.label.label_similarity import CONSTANT_RTOL, similarity_matrix
from tasks.label.llm_rating import Rating
from tasks.label.pair_units import SHARD_SCHEMA, Unit, finish_rows
from tasks.label.scorer import load_scorer

# The settings live in tasks/label/settings.py; re-exported here for the callers that import them from labeling.
from tasks.label.settings import (  # noqa: E402,F401
    DEFAULT_CANDIDATES,
    TERMS,
    LabelMethod,
    LabelSettings,
)
from tasks.llm.teacher import teacher_labels


def disc_log_probs(trained: TrainedCoherence, units: list[Unit], reference: list[str], max_len: int = 64,
                   device: str | None = None) -> list[np.ndarray]:
    """log p_disc for every (sentence, context) of every unit: one batched encoding of the distinct texts.
    With `reference` sentences, each context's mean over them is subtracted (its fit to a typical sentence)."""
    sent_texts = sorted({s for u in units for s in u.sentences} | set(reference))
    lefts = sorted({t for u in units for t in u.left})
    rights = sorted({t for u in units for t in u.right})
    enc = {name: (dict(zip(texts, range(len(texts)))), trained.encode(texts, max_len, device=device))
           for name, texts in (("s", sent_texts), ("l", lefts), ("r", rights)) if texts}
    out = []
    for u in units:
        if not u.context_ids:
            out.append(np.zeros((len(u.sentences), 0)))
            continue
        li = enc["l"][1][[enc["l"][0][t] for t in u.left]]
        ri = enc["r"][1][[enc["r"][0][t] for t in u.right]]

        def log_sigmoid(texts: list[str]) -> np.ndarray:
            rows = [trained.model.rank_logits(enc["s"][1][enc["s"][0][s]], li, ri) for s in texts]
            return -np.logaddexp(0.0, -np.asarray(rows, dtype=np.float64))  # stable log sigmoid

        scores = log_sigmoid(u.sentences)
        out.append(scores - log_sigmoid(reference).mean(axis=0) if reference else scores)
    return out


def context_groups(lm: TokenizedLM, lefts: list[list[int]], sents: list[list[int]], rights: list[list[int]],
                   with_right: bool = True, baseline: bool = False, start: list[int] | None = None,
                   references: list[list[int]] = (), right_first: list[list[int]] | None = None) -> list[Group]:
    """One group per context: prefix [start] c<, continuations s_j (+ c> when λ4 is on) for every sentence j, then
    the reference sentences (λ2's per-context baseline), and with the baseline one more continuation reading c> right
    after c< (no sentence): log p(c> | c<). With `right_first` (c> token ids + separator per context) the prefix is
    [start] c> ⏎ c<: the LM has read what follows the gap before it reads s."""
    start = lm.start_ids if start is None else start
    return [Group(start + (right_first[c] if right_first is not None else []) + left,
                  [[s, right] if with_right else [s] for s in sents]
                  + [[r] for r in references]
                  + ([[[], right]] if baseline else []))
            for c, (left, right) in enumerate(zip(lefts, rights))]


def lm_log_probs(lm: TokenizedLM, units: list[Unit], settings: LabelSettings, references: list[str] = ()
                 ) -> list[dict[str, np.ndarray]]:
    """Mean token log-probs (n_sentences, n_contexts) per unit for the LM terms whose λ is non-zero. `references`:
    sentences whose mean λ2 score on a context is subtracted from every sentence's (the context's own
    predictability; settings.lm_reference_sentences of them)."""
    w, n = settings.weights(), settings.max_segment_tokens
    out: list[dict[str, np.ndarray]] = [{} for _ in units]
    start = lm.start_for(settings.start_token)
    lefts = [lm.encode(u.left, n, keep="end") for u in units]
    rights = [lm.encode([" " + t for t in u.right], n) for u in units]
    sents = [lm.encode([" " + s for s in u.sentences], n) for u in units]
    chosen = list(references)[: settings.lm_reference_sentences]
    refs = lm.encode([" " + s for s in chosen], n) if chosen else []
    if w["lm_sentence"] or w["lm_right"]:
        right_on = bool(w["lm_right"])
        baseline = right_on and settings.context_baseline
        first = None
        if settings.lm_prompt == "right_first":
            sep = lm.encode(["\n\n"], 4)[0]
            first = [[r + sep for r in lm.encode(u.right, n)] for u in units]
        groups = [g for k in range(len(units))
                  for g in context_groups(lm, lefts[k], sents[k], rights[k], right_on, baseline, start, refs,
                                          first[k] if first else None)]
        scored = iter(lm.score(groups, scaled_batch(settings.max_batch_tokens, lm.device)))
        for k, u in enumerate(units):
            m, r = len(u.sentences), len(refs)
            if not u.context_ids:
                out[k]["lm_sentence"] = np.zeros((m, 0))
                if right_on:
                    out[k]["lm_right"] = np.zeros((m, 0))
                continue
            sums, counts = zip(*(next(scored) for _ in u.context_ids))
            mean = np.stack(sums, axis=1) / np.maximum(np.stack(counts, axis=1), 1)  # (rows, contexts, segments)
            out[k]["lm_sentence"] = mean[:m, :, 0] - (mean[m : m + r, :, 0].mean(axis=0) if r else 0.0)
            if r:
                out[k]["lm_sentence_baseline"] = mean[m : m + r, :, 0].mean(axis=0)
            if right_on:
                out[k]["lm_right"] = mean[:m, :, 1] - (mean[m + r, :, 1] if baseline else 0.0)
            if baseline:
                out[k]["lm_right_baseline"] = mean[m + r, :, 1]
    if w["lm_left"]:
        # One group per (unit, sentence): prefix s, continuations c> + c< for every context.
        raw_sents = [lm.encode(u.sentences, n) for u in units]
        spaced_lefts = [lm.encode([" " + t for t in u.left], n, keep="end") for u in units]
        groups = [Group(start + prefix, [[rights[k][c], spaced_lefts[k][c]] for c in range(len(u.context_ids))])
                  for k, u in enumerate(units)
                  for prefix in raw_sents[k] + ([[]] if settings.context_baseline else [])]
        scored = iter(lm.score(groups, scaled_batch(settings.max_batch_tokens, lm.device)))
        for k, u in enumerate(units):
            rows = []
            for _ in range(len(u.sentences) + settings.context_baseline):
                sums, counts = next(scored)
                rows.append(sums[:, 1] / np.maximum(counts[:, 1], 1) if len(sums) else np.zeros(0))
            rows = np.asarray(rows).reshape(len(rows), len(u.context_ids))
            # With context_baseline the last row is log p(c< | c>) without the sentence.
            out[k]["lm_left"] = rows[: len(u.sentences)] - (rows[-1] if settings.context_baseline else 0.0)
    return out


def score_terms(units: list[Unit], settings: LabelSettings, trained: TrainedCoherence | None,
                lm: TokenizedLM | None, reference: list[str] = ()) -> list[dict[str, np.ndarray]]:
    """Per unit: {term: (n_sentences, n_contexts)} for every term with a non-zero λ."""
    w = settings.weights()
    terms: list[dict[str, np.ndarray]] = [{} for _ in units]
    if w["disc"]:
        if trained is None:
            raise ConfigError("lambda_disc is non-zero but no coherence model was given.")
        device = str(resolve_device(settings.device))  # a frozen encoder's; the BiLSTM scores on the CPU
        for t, d in zip(terms, disc_log_probs(trained, units, list(reference) if settings.context_baseline else [],
                                              device=device)):
            t["disc"] = d
    if w["lm_sentence"] or w["lm_right"] or w["lm_left"]:
        if lm is None:
            raise ConfigError("An LM term has a non-zero λ but no causal LM was given.")
        for t, parts in zip(terms, lm_log_probs(lm, units, settings, reference)):
            t.update({k: v for k, v in parts.items() if k in w and w[k]})
    return terms


def select_contexts(scores: np.ndarray, own: np.ndarray, settings: LabelSettings) -> tuple[np.ndarray, np.ndarray]:
    """Each sentence's C_s and the unit's label columns: (own mask over the kept columns, kept column indices).

    'score' (Sun et al. 2022, Eq. 3): among a sentence's own candidates (its top `candidates_per_sentence` stage-2
    contexts, already diverse), the `contexts_per_sentence` with the highest S(s, c) — the contexts it fits best;
    the label reads the union of the chosen sets. 'rank': the candidates are the stage-2 top-k already, all kept."""
    if settings.context_selection == "rank":
        return own, np.arange(scores.shape[1])
    k = settings.contexts_per_sentence
    chosen = np.zeros_like(own)
    for i in range(len(own)):  # per sentence of a unit (2–4), over its own candidates
        idx = np.flatnonzero(own[i])
        chosen[i, idx[np.argsort(-scores[i, idx], kind="stable")[:k]]] = True
    keep = np.flatnonzero(chosen.any(axis=0))
    return chosen[:, keep], keep


def combine(terms: dict[str, np.ndarray], weights: dict[str, float]) -> np.ndarray:
    """S = Σ λ_t · term_t over the computed terms."""
    return sum(weights[name] * matrix for name, matrix in terms.items())


def label_units(units: list[Unit], settings: LabelSettings, trained: TrainedCoherence | None,
                lm: TokenizedLM | None, reference: list[str] = ()) -> tuple[list[dict], list[dict], dict]:
    """Pair rows, quarantine rows and counts for a list of units."""
    weights = settings.weights()
    scorable = [u for u in units if len(u.context_ids) >= settings.min_contexts]
    rows, rejected = [], []
    for u in units:
        if len(u.context_ids) < settings.min_contexts:
            reason = "no_contexts" if not u.context_ids else "too_few_contexts"
            rejected += [_pair_fields(u, i, j, rel, extra) | {
                "reason": reason, "detail": f"{len(u.context_ids)} contexts in the union of both sentences' "
                f"context sets (min_contexts={settings.min_contexts})"} for i, j, rel, extra in u.pairs]
    all_terms = score_terms(scorable, settings, trained, lm, reference) if scorable else []
    # the dtype the scores were computed in: the torch model's own; settings' (resolved) for the others
    rtol = CONSTANT_RTOL[str(lm.model.dtype).removeprefix("torch.") if isinstance(lm, CausalLM)
                         else resolve_lm_dtype(settings.dtype, None)]
    for u, terms in zip(scorable, all_terms):
        scores = combine(terms, weights)
        own, keep = select_contexts(scores, u.own_mask(), settings)
        terms = {name: m[:, keep] for name, m in terms.items()}
        label = similarity_matrix(scores[:, keep], settings.similarity, own, rtol)
        parts = {name: similarity_matrix(m, settings.similarity, own, rtol) for name, m in terms.items()}
        n_own = own.sum(axis=1)
        for i, j, rel, extra in u.pairs:
            base = _pair_fields(u, i, j, rel, extra) | {"n_contexts_s1": int(n_own[i]), "n_contexts_s2": int(n_own[j])}
            if len(keep) < settings.min_contexts:  # the chosen sets' union, not the candidates'
                rejected.append(base | {"reason": "too_few_contexts", "detail": f"{len(keep)} contexts in the union "
                                        f"of both sentences' chosen sets (min_contexts={settings.min_contexts})"})
                continue
            if np.isnan(label[i, j]):
                rejected.append(base | {"reason": "degenerate_vector", "detail": (
                    "neither sentence has contexts of its own: nothing to contrast"
                    if settings.similarity == "contrast" else
                    "a context vector is constant over the contexts (up to float rounding); correlation undefined")})
                continue
            rows.append(base | {"label": float(label[i, j]), "context_label": float(label[i, j]),
                                "n_contexts": len(keep)}
                        | {f"label_{name}": _finite(parts[name][i, j]) if name in parts else None for name in TERMS})
    pairs_scored = sum(len(u.sentences) * len(u.context_ids) for u in scorable)
    counts = {"units": len(units), "scored_units": len(scorable), "sentence_context_scores": pairs_scored,
              "pairs": len(rows), "rejected": len(rejected)}
    return rows, rejected, counts


def _finite(x: float) -> float | None:
    """A per-term diagnostic label; None where that term alone is constant over the contexts."""
    return None if np.isnan(x) else float(x)


def _pair_fields(u: Unit, i: int, j: int, relation: str, extra: dict) -> dict:
    return {"unit_id": u.unit_id, "s1_id": u.sentence_ids[i], "s1": u.sentences[i], "s2_id": u.sentence_ids[j],
            "s2": u.sentences[j], "relation": relation, "n_contexts_s1": u.own_contexts[i],
            "n_contexts_s2": u.own_contexts[j], **extra}


def uses_lm(settings: LabelSettings) -> bool:
    return uses_contexts(settings) and any(settings.weights()[t] for t in ("lm_sentence", "lm_left", "lm_right"))


def uses_contexts(settings: LabelSettings) -> bool:
    return settings.method != "llm_rating"


def uses_rating(settings: LabelSettings) -> bool:
    return settings.method != "context"


def context_label_01(label: np.ndarray, similarity: str) -> np.ndarray:
    """A context label on 0–1: the contrast already is; correlations and cosines map [−1, 1] linearly."""
    label = np.asarray(label, dtype=np.float64)
    return label if similarity == "contrast" else (label + 1.0) / 2.0


def tfidf_cosines(s1: list[str], s2: list[str]) -> np.ndarray:
    """Each pair's TF-IDF cosine (uni+bigrams, sublinear tf), the vectorizer fit on the pairs' own sentences — the
    word-overlap partner of the rating that benchmarks/context_labels.py measures (its `baseline: TF-IDF cosine`)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if not s1:
        return np.zeros(0)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(list(s1) + list(s2))
    a, b = vectorizer.transform(s1), vectorizer.transform(s2)
    return np.asarray(a.multiply(b).sum(axis=1), dtype=np.float64).ravel()


def final_label(context: np.ndarray | None, rating: np.ndarray | None, settings: LabelSettings,
                tfidf: np.ndarray | None = None, teacher: np.ndarray | None = None) -> np.ndarray:
    """The pair's label by `settings.method`: the context label, the rating on 0–1, or their weighted mix with the
    TF-IDF and teacher cosines (a part with weight 0 is left out, so a missing one never makes the label NaN)."""
    if settings.method == "context":
        return np.asarray(context, dtype=np.float64)
    scaled = np.asarray(rating, dtype=np.float64) / 5.0
    if settings.method == "llm_rating":
        return scaled
    label = settings.rating_weight * scaled
    if settings.tfidf_weight:
        label = label + settings.tfidf_weight * np.asarray(tfidf, dtype=np.float64)
    if settings.uses_teacher:
        label = label + settings.teacher_weight * np.asarray(teacher, dtype=np.float64)
    if settings.context_weight:
        label = label + settings.context_weight * context_label_01(context, settings.similarity)
    return label


def apply_ratings(table: pa.Table, ratings: list[Rating], settings: LabelSettings) -> tuple[pa.Table, list[dict]]:
    """Pairs + their ratings (same order) → the pairs with rating, context_label, tfidf_cosine (teacher_cosine when
    `settings.uses_teacher`) and the final label, and quarantine rows for the pairs the LLM could not rate (reason
    llm_error / rating_unparsed, kept for a re-run)."""
    kept, rejected = [], []
    for row, rating in zip(table.to_pylist(), ratings):
        if rating.score is None:
            reason = (rating.error or "rating_unparsed").split(":")[0]
            rejected.append(row | {"reason": reason, "detail": rating.error})
            continue
        kept.append(row | {"rating": rating.score})
    if kept:
        context = np.array([np.nan if r["context_label"] is None else r["context_label"] for r in kept])
        s1, s2 = [r["s1"] for r in kept], [r["s2"] for r in kept]
        tfidf = tfidf_cosines(s1, s2)
        teacher = teacher_labels(pd.DataFrame({"s1": s1, "s2": s2}), settings.teacher,
                                 str(resolve_device(settings.device)))[0] if settings.uses_teacher else None
        labels = final_label(context, np.array([r["rating"] for r in kept]), settings, tfidf, teacher)
        for i, (r, label, cosine) in enumerate(zip(kept, labels, tfidf)):
            r["label"], r["tfidf_cosine"] = float(label), float(cosine)
            r["teacher_cosine"] = None if teacher is None else float(teacher[i])
    return pa.Table.from_pylist(kept, schema=table.schema) if kept else table.schema.empty_table(), rejected


def unit_pair_rows(units: list[Unit]) -> list[dict]:
    """Every pair of every unit, unlabeled (method 'llm_rating' needs no contexts)."""
    return [_pair_fields(u, i, j, rel, extra) | {"n_contexts": len(u.context_ids)}
            for u in units for i, j, rel, extra in u.pairs]


@task(name="label-shard", cache_policy=NO_CACHE, retries=1)
def label_shard(units: list[Unit], settings: LabelSettings, reference: list[str], coherence_dir: str | None,
                lm_path: str | None, lm_sha256: str | None, out_path: str) -> dict:
    """One shard of units → a shard Parquet (labeled and quarantined pairs, `reason` null when labeled) and a
    marker with its checksum and counts; a shard whose marker verifies is not scored again."""
    done = finished_shard(out_path)
    if done is not None:
        return {"path": out_path, "counts": done, "reused": True}
    trained = None
    if settings.lambda_disc:
        digest = read_manifest(Path(coherence_dir))["outputs"]["model.pt"]["sha256"]
        trained = load_trained_cached(str(coherence_dir), digest)
    lm = load_scorer(settings, lm_path, lm_sha256) if uses_lm(settings) else None
    rows, rejected, counts = label_units(units, settings, trained, lm, reference)
    commit_shard(out_path, finish_rows(rows + rejected, SHARD_SCHEMA), counts)
    return {"path": out_path, "counts": counts, "reused": False}


def reference_sentences(units: list[Unit], n: int, seed: int) -> list[str]:
    """A fixed seeded sample of the run's sentences: the typical sentences of the disc baseline."""
    texts = sorted({s for u in units for s in u.sentences})
    rng = np.random.default_rng(seed)
    return [texts[i] for i in sorted(rng.permutation(len(texts))[:n])]
