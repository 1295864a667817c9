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
both is kept only in the first). For each signal: ROC AUC for "bad" with a bootstrap 95 % interval; for the best
one, the threshold chosen on the first set and what passing it would leave on the second (good rate among passed,
share passed) — the estimate of what a rejection check at that threshold does to the reading.

    .venv/bin/python -m benchmarks.reader_signals [--out benchmarks/results/reader_signals.csv]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from tasks.core.defaults import DEFAULT_ENCODER  # noqa: E402
from tasks.generate.validation import FUNCTION_WORDS, added_words, normalize  # noqa: E402
from tasks.llm.local_models import load_encoder  # noqa: E402
from tasks.llm.teacher import teacher_folder  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
QUALIFIERS = frozenset(
    "not no never nor none nothing cannot cant dont doesnt didnt isnt arent wasnt werent wont wouldnt shouldnt couldnt "
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


def lexical_signals(anchor: str, text: str) -> dict:
    words, anchor_words = set(normalize(text).split()), normalize(anchor).split()
    return {"added_words": len(added_words(text, anchor)),
            "dropped_words": sum(w not in words for w in _content(anchor)),
            "dropped_qualifiers": sum(w in QUALIFIERS and w not in words for w in anchor_words)}


def token_alignment(model, anchors: list[str], texts: list[str], name: str = "mpnet") -> list[dict]:
    """BERTScore-style greedy alignment with the model's contextual token vectors (letters-only word pieces)."""
    tokenizer = model.tokenizer
    out = []
    for a, t in zip(anchors, texts):
        vecs = model.encode([a, t], output_value="token_embeddings", convert_to_numpy=False)
        keep = []
        for sentence, v in zip((a, t), vecs):
            ids = tokenizer(sentence, truncation=True, max_length=v.shape[0])["input_ids"][: v.shape[0]]
            pieces = tokenizer.convert_ids_to_tokens(ids)
            mask = [p.lstrip("▁Ġ#").isalpha() and p not in tokenizer.all_special_tokens for p in pieces]
            m = v.detach().cpu().numpy()[np.array(mask, dtype=bool)]
            keep.append(m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12))
        sim = keep[0] @ keep[1].T
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


# direction: +1 where a larger value means "more likely bad"
SIGNALS = {"minilm_cos": -1, "mpnet_cos": -1, "mpnet_tok_recall_min": -1, "mpnet_tok_recall_mean": -1,
           "mpnet_tok_precision_min": -1, "mpnet_tok_precision_mean": -1, "minilm_tok_recall_min": -1,
           "minilm_tok_recall_mean": -1, "minilm_tok_precision_min": -1, "added_words": 1, "dropped_words": 1,
           "dropped_qualifiers": 1}


def auc_ci(bad: np.ndarray, score: np.ndarray, rng: np.random.Generator, n: int = 1000) -> tuple[float, float, float]:
    point = roc_auc_score(bad, score)
    draws = []
    for _ in range(n):
        idx = rng.integers(0, len(bad), len(bad))
        if bad[idx].min() != bad[idx].max():
            draws.append(roc_auc_score(bad[idx], score[idx]))
    return point, float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    z, p = 1.96, k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def threshold_table(choose: pd.DataFrame, confirm: pd.DataFrame, signal: str, min_pass: float = 0.5) -> dict:
    """The pass threshold that maximizes the good rate among passed on `choose` while passing ≥ `min_pass` of it;
    then what it does on `confirm`."""
    sign = SIGNALS[signal]
    risk_c, risk_f = sign * choose[signal].to_numpy(), sign * confirm[signal].to_numpy()
    best = None
    for cut in np.unique(risk_c):
        passed = risk_c <= cut
        if passed.mean() < min_pass:
            continue
        rate = (choose["verdict"].to_numpy()[passed] == "good").mean()
        if best is None or rate > best[1]:
            best = (cut, rate, passed.mean())
    cut = best[0]
    passed = risk_f <= cut
    good = int((confirm["verdict"].to_numpy()[passed] == "good").sum())
    lo, hi = wilson(good, int(passed.sum()))
    return {"signal": signal, "pass if": f"{'≥' if sign < 0 else '≤'} {sign * cut:.3f}",
            "choose: good among passed": f"{best[1]:.2f} (passes {best[2]:.2f})",
            "confirm: base good rate": f"{(confirm['verdict'] == 'good').mean():.2f}",
            "confirm: good among passed": f"{good}/{int(passed.sum())} = {good / max(passed.sum(), 1):.2f} [{lo:.2f}, {hi:.2f}]",
            "confirm: passes": f"{passed.mean():.2f}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="write the scored rows (CSV)")
    parser.add_argument("--scored", type=Path, default=None, help="read the scored rows of an earlier --out")
    parser.add_argument("--min-pass", type=float, default=0.5, help="a threshold must pass this share of the choose set")
    args = parser.parse_args(argv)
    scored = pd.read_csv(args.scored) if args.scored else signals(labeled())
    if args.out:
        scored.to_csv(args.out, index=False)
    rng = np.random.default_rng(0)
    for kind in ("positive", "intermediate"):
        rows = []
        part = scored[scored["kind"] == kind]
        print(f"\n## {kind}: developer {len(part[part.reader == 'developer'])} "
              f"({(part[part.reader == 'developer'].verdict == 'bad').mean():.2f} bad), blind "
              f"{len(part[part.reader == 'blind'])} ({(part[part.reader == 'blind'].verdict == 'bad').mean():.2f} bad)")
        for signal, sign in SIGNALS.items():
            row = {"signal": signal}
            for reader in ("developer", "blind"):
                sub = part[part["reader"] == reader]
                point, lo, hi = auc_ci((sub["verdict"] == "bad").to_numpy(), sign * sub[signal].to_numpy(), rng)
                row[f"AUC {reader}"] = f"{point:.2f} [{lo:.2f}, {hi:.2f}]"
            rows.append(row)
        print(pd.DataFrame(rows).to_string(index=False))
        dev = part[part["reader"] == "developer"]
        best = max(SIGNALS, key=lambda s: roc_auc_score(dev["verdict"] == "bad", SIGNALS[s] * dev[s]))
        print()
        print(pd.DataFrame([threshold_table(dev, part[part["reader"] == "blind"], s, args.min_pass)
                            for s in dict.fromkeys([best, "mpnet_cos", "mpnet_tok_recall_min", "minilm_tok_recall_min"])]).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
