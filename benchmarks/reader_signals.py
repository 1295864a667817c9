"""Which signal sees what a reader sees in positives and intermediates (issue 34's unmet reading targets)?

Every labeled positive (the strict every-fact reading) and intermediate in benchmarks/data — the developer's readings
(verifier_generations*.csv, best_of_n_positives.csv, triples_reading_check*.csv) and the blind readings by helpers
who never wrote a check (blind_reading_34*.csv) — scored by candidate signals that need no LLM request:

- `minilm_cos`, `mpnet_cos`: sentence cosine to the anchor (all-MiniLM-L6-v2: the chooser's; all-mpnet-base-v2: the
  teacher, `./stsgen teacher fetch`);
- `mpnet_tok_recall_min` / `_mean`, `mpnet_tok_precision_min` / `_mean`: BERTScore-style greedy token alignment with
  all-mpnet-base-v2's contextual token vectors (recall: each anchor token's best match in the generation; precision:
  each generation token's best match in the anchor), word pieces that are letters only, special tokens aside;
- `added_words` (content words outside the LCS with the anchor: the intermediate chooser's preference),
  `dropped_words` (the anchor's content words missing from the generation), `dropped_qualifiers` (negations,
  modals, hedges, frequency and quantity words of the anchor missing from the generation).

Chosen on the developer's readings, confirmed on the blind ones (another reader, other runs; a generation read in
both is kept only in the first; the readings of this stop's own experiments, OWN_READINGS, left out of both). For each
signal: its direction and ROC AUC for "bad" on the developer set, the same direction's AUC on the blind set, with
bootstrap 95 % intervals that resample anchors; for the best one on the developer set, thresholds passing 10–70 % of
it and what each passes on the blind set, and how good that is — what a rejection check at that threshold would
leave.

    .venv/bin/python -m benchmarks.reader_signals [--out benchmarks/results/reader_signals.csv]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.stats import binomtest  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from tasks.core.defaults import DEFAULT_ENCODER  # noqa: E402
from tasks.generate.validation import FUNCTION_WORDS, added_words, normalize  # noqa: E402
from tasks.llm.local_models import load_encoder  # noqa: E402
from tasks.llm.teacher import teacher_folder  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
QUALIFIERS = frozenset(
    "not no never nor none nothing cannot "
    "may might can could would should must will shall seems seem seemed appears appear likely unlikely probably "
    "possibly perhaps maybe reportedly allegedly apparently almost nearly about approximately around some many most "
    "few several all every each any only just usually often always sometimes rarely seldom generally typically "
    "mostly largely partly mainly frequently occasionally also even still yet already said says according".split())


def _rows(path: Path, reader: str, kind: str, text: str, verdict: str) -> pd.DataFrame:
    frame = pd.read_csv(path)
    if "kind" in frame.columns and text == "candidate":
        frame = frame[frame["kind"] == kind]
    out = pd.DataFrame({"anchor": frame["anchor"], "text": frame[text], "verdict": frame[verdict]})
    out = out[out["verdict"].isin(["good", "bad"]) & out["text"].notna()]
    return out.assign(kind=kind, reader=reader, file=path.name)


def labeled(exclude: tuple[str, ...] = ()) -> pd.DataFrame:
    """(kind, anchor, text, verdict, reader, file), one row per distinct generation; developer rows first.
    `exclude`: reading files (by name) left out."""
    parts = []
    for name in ("verifier_generations.csv", "verifier_generations_2.csv"):
        for kind in ("positive", "intermediate"):
            parts.append(_rows(DATA / name, "developer", kind, "candidate", "human"))
    parts.append(_rows(DATA / "best_of_n_positives.csv", "developer", "positive", "generation", "every_fact"))
    parts.append(_rows(DATA / "triples_reading_check.csv", "developer", "positive", "positive", "positive_verdict"))
    parts.append(_rows(DATA / "triples_reading_check.csv", "developer", "intermediate", "intermediate",
                       "intermediate_verdict"))
    parts.append(_rows(DATA / "triples_reading_check_24.csv", "developer", "positive", "positive", "positive_every_fact"))
    parts.append(_rows(DATA / "triples_reading_check_24.csv", "developer", "intermediate", "intermediate",
                       "intermediate_verdict"))
    for path in sorted(DATA.glob("blind_reading_34*.csv")):
        if path.name.endswith(".key.csv") or path.name in exclude:
            continue
        parts.append(_rows(path, "blind", "positive", "positive", "positive_every_fact"))
        parts.append(_rows(path, "blind", "intermediate", "intermediate", "intermediate_verdict"))
    frame = pd.concat(parts, ignore_index=True)
    return frame.drop_duplicates(["kind", "anchor", "text"], keep="first").reset_index(drop=True)


def _content(text: str) -> list[str]:
    return [w for w in normalize(text).split() if w not in FUNCTION_WORDS]


def _qualifier_words(text: str) -> list[str]:
    """Words as `normalize` splits them, a contracted negation first spelled out (normalize would make "can't"
    "can t", a modal, and "didn't" "didn t", nothing)."""
    return normalize(re.sub(r"n['’]t\b", " not", text, flags=re.IGNORECASE)).split()


def lexical_signals(anchor: str, text: str) -> dict:
    words, anchor_words = set(_qualifier_words(text)), _qualifier_words(anchor)
    return {"added_words": len(added_words(text, anchor)),
            "dropped_words": sum(w not in words for w in _content(anchor)),
            "dropped_qualifiers": sum(w in QUALIFIERS and w not in words for w in anchor_words)}


def _token_vectors(model, sentences: list[str]) -> list[np.ndarray]:
    """Each sentence's unit-norm contextual token vectors, letters-only word pieces (special tokens aside); one
    batched encode for all of them."""
    tokenizer, special = model.tokenizer, set(model.tokenizer.all_special_tokens)
    vectors = model.encode(sentences, batch_size=32, output_value="token_embeddings", convert_to_numpy=False)
    out = []
    for sentence, v in zip(sentences, vectors):
        ids = tokenizer(sentence, truncation=True, max_length=v.shape[0])["input_ids"][: v.shape[0]]
        mask = np.array([p.lstrip("▁Ġ#").isalpha() and p not in special for p in tokenizer.convert_ids_to_tokens(ids)],
                        dtype=bool)
        m = v.detach().cpu().numpy()[mask]
        out.append(m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12))
    return out


def token_alignment(model, anchors: list[str], texts: list[str], name: str = "mpnet") -> list[dict]:
    """BERTScore-style greedy alignment with the model's contextual token vectors (letters-only word pieces); each
    distinct sentence encoded once."""
    unique = list(dict.fromkeys([*anchors, *texts]))
    vectors = dict(zip(unique, _token_vectors(model, unique)))
    out = []
    for a, t in zip(anchors, texts):
        sim = vectors[a] @ vectors[t].T
        recall, precision = sim.max(axis=1), sim.max(axis=0)
        out.append({f"{name}_tok_recall_min": float(recall.min()), f"{name}_tok_recall_mean": float(recall.mean()),
                    f"{name}_tok_precision_min": float(precision.min()),
                    f"{name}_tok_precision_mean": float(precision.mean())})
    return out


def cosines(model, anchors: list[str], texts: list[str]) -> np.ndarray:
    a = model.encode(anchors, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
    b = model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
    return np.sum(a * b, axis=1)


def signals(frame: pd.DataFrame) -> pd.DataFrame:
    minilm = load_encoder(DEFAULT_ENCODER)
    mpnet = load_encoder(str(teacher_folder()))
    anchors, texts = frame["anchor"].tolist(), frame["text"].tolist()
    out = frame.copy()
    out["minilm_cos"] = cosines(minilm, anchors, texts)
    out["mpnet_cos"] = cosines(mpnet, anchors, texts)
    out = pd.concat([out, pd.DataFrame(token_alignment(mpnet, anchors, texts), index=out.index),
                     pd.DataFrame(token_alignment(minilm, anchors, texts, "minilm"), index=out.index),
                     pd.DataFrame([lexical_signals(a, t) for a, t in zip(anchors, texts)], index=out.index)], axis=1)
    return out


SIGNALS = ("minilm_cos", "mpnet_cos", "mpnet_tok_recall_min", "mpnet_tok_recall_mean", "mpnet_tok_precision_min",
           "mpnet_tok_precision_mean", "minilm_tok_recall_min", "minilm_tok_recall_mean", "minilm_tok_precision_min",
           "added_words", "dropped_words", "dropped_qualifiers")
# The readings of this stop's own experiments (benchmarks.positive_choice, the intermediate prompts): their rows were
# selected by the signals compared here (the slots where two of them disagree), so they confirm nothing about them.
OWN_READINGS = ("blind_reading_34f.csv", "blind_reading_34g.csv")


def direction(frame: pd.DataFrame, signal: str) -> int:
    """+1 where a larger value means "more likely bad" on `frame` (the choosing set), else −1."""
    return 1 if roc_auc_score(frame["verdict"] == "bad", frame[signal]) >= 0.5 else -1


def auc_ci(bad: np.ndarray, score: np.ndarray, rng: np.random.Generator, n: int = 1000,
           groups: np.ndarray | None = None) -> tuple[float, float, float]:
    """ROC AUC and a bootstrap 95 % interval; with `groups` (e.g. the anchors) whole groups are resampled, since two
    generations of one anchor are not independent readings."""
    point = roc_auc_score(bad, score)
    keys, members = np.unique(groups if groups is not None else np.arange(len(bad)), return_inverse=True)
    rows_of = [np.flatnonzero(members == k) for k in range(len(keys))]
    draws = []
    for _ in range(n):
        idx = np.concatenate([rows_of[k] for k in rng.integers(0, len(keys), len(keys))])
        if bad[idx].min() != bad[idx].max():
            draws.append(roc_auc_score(bad[idx], score[idx]))
    return point, float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def threshold_table(choose: pd.DataFrame, confirm: pd.DataFrame, signal: str,
                    pass_shares: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5, 0.7)) -> list[dict]:
    """For each share of the choosing set a check would pass (its least risky part by the signal, the direction chosen
    there), the threshold that does it, then what that threshold passes on `confirm` and how good what it passes is:
    what a rejection check at that threshold would leave."""
    sign = direction(choose, signal)
    risk_c, risk_f = sign * choose[signal].to_numpy(), sign * confirm[signal].to_numpy()
    good_f = confirm["verdict"].to_numpy() == "good"
    rows = []
    for share in pass_shares:
        cut = float(np.quantile(risk_c, share))
        passed_c, passed = risk_c <= cut, risk_f <= cut
        good = int(good_f[passed].sum())
        lo, hi = binomtest(good, int(passed.sum())).proportion_ci(method="wilson") if passed.any() else (np.nan,) * 2
        rows.append({"signal": signal, "pass if": f"{'≥' if sign < 0 else '≤'} {sign * cut:.3f}",
                     "choose: passes · good among passed": f"{passed_c.mean():.2f} · "
                     f"{(choose['verdict'].to_numpy()[passed_c] == 'good').mean():.2f}",
                     "confirm: passes": f"{passed.mean():.2f}",
                     "confirm: good among passed": f"{good}/{int(passed.sum())} = {good / max(passed.sum(), 1):.2f} "
                     f"[{lo:.2f}, {hi:.2f}] (base {good_f.mean():.2f})"})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="write the scored rows (CSV)")
    parser.add_argument("--scored", type=Path, default=None, help="read the scored rows of an earlier --out")
    args = parser.parse_args(argv)
    scored = pd.read_csv(args.scored) if args.scored else signals(labeled())
    if args.scored:  # the lexical signals are cheap: recomputed, so a change to them needs no encoding
        lexical = pd.DataFrame([lexical_signals(a, t) for a, t in zip(scored["anchor"], scored["text"])])
        scored[lexical.columns] = lexical.to_numpy()
    if args.out:
        scored.to_csv(args.out, index=False)
    scored = scored[~scored["file"].isin(OWN_READINGS)]
    rng = np.random.default_rng(0)
    for kind in ("positive", "intermediate"):
        part = scored[scored["kind"] == kind]
        dev, blind = part[part["reader"] == "developer"], part[part["reader"] == "blind"]
        print(f"\n## {kind}: developer {len(dev)} ({(dev.verdict == 'bad').mean():.2f} bad), blind {len(blind)} "
              f"({(blind.verdict == 'bad').mean():.2f} bad); direction chosen on the developer set "
              "(↑: larger = more likely bad, ↓: smaller)")
        rows = []
        for signal in SIGNALS:
            sign = direction(dev, signal)
            row = {"signal": f"{signal} {'↑' if sign > 0 else '↓'}"}
            for reader, sub in (("developer", dev), ("blind", blind)):
                point, lo, hi = auc_ci((sub["verdict"] == "bad").to_numpy(), sign * sub[signal].to_numpy(), rng,
                                       groups=sub["anchor"].to_numpy())
                row[f"AUC {reader}"] = f"{point:.2f} [{lo:.2f}, {hi:.2f}]"
            rows.append(row)
        print(pd.DataFrame(rows).to_string(index=False))
        best = max(SIGNALS, key=lambda s: roc_auc_score(dev["verdict"] == "bad", direction(dev, s) * dev[s]))
        print(f"\nbest on the developer set: {best}")
        print(pd.DataFrame(threshold_table(dev, blind, best)).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
