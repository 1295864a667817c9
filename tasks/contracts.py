"""The contracts between stages: what each stage writes and the next one reads.

- stage 1 → `triples.parquet` / `rejected.parquet` (TRIPLES_SCHEMA, REJECTED_SCHEMA; the slots of a triple and the
  kinds an LLM generates), read back by `read_triples`;
- sentences → stage 2 (`load_query_sentences`: every sentence of a triples or pairs file, or a text file), each
  identified by `sentence_id` (a content hash, the join key of stages 2 and 3);
- stage 2 → `contexts.parquet` (CONTEXT_COLUMNS, `read_contexts`) and the trained coherence model folder
  (`load_trained`), both read by stage 3;
- stage 3 → `pairs.parquet` / `rejected.parquet` (PAIRS_SCHEMA, REJECTED_PAIRS_SCHEMA), read by stage 4;
- build-dataset → a version folder (`dataset_tables`: its triples.parquet and pairs.parquet), read by stage 4.

The schemas are fixed here (and documented in the README), so every run writes the same columns in the same types,
whatever the pattern: for NLI the intermediate columns are null. Stage packages import this module, never each other.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.core.config import ConfigError
from tasks.core.store import local_path, read_input_table, read_manifest, sentence_id, verify_outputs  # noqa: F401

if TYPE_CHECKING:
    from models.coherence import CoherenceModel, Vocab

from tasks.core.stage import StageIO  # noqa: E402,F401  (re-exported: each stage module declares its IO)

TRIPLE_SLOTS = ("anchor", "positive", "intermediate", "negative")



ALL_KINDS = ("positive", "intermediate", "negative")
_PER_KIND = [
    ("base", pa.string()),
    ("prompt", pa.string()),
    ("example_ids", pa.list_(pa.string())),
    ("attempts", pa.int32()),
    ("seed", pa.int64()),
    ("temperature", pa.float64()),
    ("top_p", pa.float64()),
    ("prompt_tokens", pa.int32()),
    ("completion_tokens", pa.int32()),
    ("latency_s", pa.float64()),
    ("cached", pa.bool_()),
    ("rules_passed", pa.list_(pa.string())),
    ("candidate", pa.int32()),  # which of the request's n choices was kept (best of N)
    ("candidates", pa.int32()),  # choices the endpoint returned
    ("judge_p_pass", pa.float64()),  # the verifier's P(pass) (null: judge off)
]
TRIPLES_SCHEMA = pa.schema(
    [
        ("source_id", pa.string()),
        ("doc_id", pa.string()),
        ("position", pa.int32()),
        ("pattern", pa.string()),
        ("model", pa.string()),
        ("judge_model", pa.string()),  # the verifier's model (null: judge off)
        ("ordering_gap", pa.float64()),  # cos(a, s+) − cos(a, s−) of the ordering check (null: off)
        ("anchor", pa.string()),
        ("positive", pa.string()),
        ("intermediate", pa.string()),
        ("negative", pa.string()),
    ]
    + [(f"{kind}_{name}", typ) for kind in ALL_KINDS for name, typ in _PER_KIND]
)
REJECTED_SCHEMA = pa.schema(
    [
        ("stage", pa.string()),  # input | generation
        ("source_id", pa.string()),
        ("kind", pa.string()),
        ("attempt", pa.int32()),
        ("seed", pa.int64()),
        ("candidate", pa.int32()),  # which choice of the request (best of N); null for rows that are not choices
        ("anchor", pa.string()),
        ("base_text", pa.string()),
        ("text", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)
# Columns that differ between an uninterrupted and a resumed run by nature (timings, cache hits).
VOLATILE_COLUMNS = tuple(f"{kind}_{name}" for kind in ALL_KINDS for name in ("latency_s", "cached"))


def triples_table(
    sample: pd.DataFrame,
    accepted: dict[str, dict[str, dict]],
    *,
    kinds: tuple[str, ...],
    pattern: str,
    model: str,
    prompts: dict[str, str],
    example_ids: dict[str, list[str]],
    bases: dict[str, str],
    judge_model: str | None = None,
) -> pa.Table:
    """One row per source sentence whose every kind was accepted, in sample order."""
    rows = []
    for src in sample.itertuples(index=False):
        gens = {k: accepted[k].get(src.source_id) for k in kinds}
        if any(g is None for g in gens.values()):
            continue
        row = {"source_id": src.source_id, "doc_id": src.doc_id, "position": int(src.position),
               "pattern": pattern, "model": model, "judge_model": judge_model, "anchor": src.text}
        for kind in ALL_KINDS:
            g = gens.get(kind)
            row[kind] = g["text"] if g else None
            meta = {name: None for name, _ in _PER_KIND}
            if g:
                meta.update({k: g[k] for k in ("attempts", "seed", "temperature", "top_p", "prompt_tokens",
                                                "completion_tokens", "latency_s", "cached", "rules_passed",
                                                "judge_p_pass", "candidate", "candidates")})
                meta.update(base=bases[kind], prompt=prompts[kind], example_ids=example_ids[kind])
            row.update({f"{kind}_{name}": value for name, value in meta.items()})
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=TRIPLES_SCHEMA)


def rejected_table(rows: list[dict]) -> pa.Table:
    names = REJECTED_SCHEMA.names
    return pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=REJECTED_SCHEMA)


TRIPLES_REQUIRED = ("source_id", "anchor", "positive", "negative")  # every triples table has these


def read_triples(path: Path, columns: tuple[str, ...] | None = None) -> pd.DataFrame:
    """A triples table; with `columns` (the reading stage's `IO.reads`) only those of them the file has: a stage
    that used a column it does not declare fails on every input, not only on one that lacks it. (A declared column
    a file lacks, e.g. intermediate, is the stage's to refuse with its reason.)"""
    required = [c for c in TRIPLES_REQUIRED if columns is None or c in columns]
    table = read_input_table(path, "Triples file", "pass a triples.parquet written by generate-sts-triples",
                             required)
    return (table.select([c for c in columns if c in table.column_names]) if columns else table).to_pandas()


def used_source_ids(run_folder: Path) -> frozenset[str]:
    """The source ids stage 1 sampled in the other runs under `run_folder`'s output directory (every source it
    tried is in its triples or its quarantine), for a run that must not sample them again."""
    from tasks.core.runs import list_runs

    ids: set[str] = set()
    for run in list_runs(run_folder.parent):
        folder = Path(run["path"]) / "generate-sts-triples"
        if folder.parent.resolve() == run_folder.resolve() or "generate-sts-triples" not in run["stages"]:
            continue
        for name in ("triples.parquet", "rejected.parquet"):
            if (folder / name).is_file():
                ids.update(pq.read_table(folder / name, columns=["source_id"]).column(0).drop_null().to_pylist())
    return frozenset(ids)


PAIR_COLUMNS = (("s1", "s2"), ("sentence1", "sentence2"))


def load_query_sentences(path: Path) -> pd.DataFrame:
    """→ sentence_id, sentence (distinct, in first-seen order) from triples, pairs (s1/s2 or sentence1/sentence2),
    a sentence/text column, or lines of text."""
    if not path.exists():
        raise ConfigError(f"Sentence file {path} does not exist; pass a triples.parquet or a sentence file.")
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except Exception as exc:
            raise ConfigError(f"{path} is not readable Parquet ({type(exc).__name__}).") from None
        cols = [c for c in TRIPLE_SLOTS if c in table.column_names]
        cols = cols or next(([a, b] for a, b in PAIR_COLUMNS if {a, b} <= set(table.column_names)), [])
        if not cols:
            cols = [c for c in ("sentence", "text") if c in table.column_names][:1]
        if not cols:
            raise ConfigError(f"{path} has none of the columns {', '.join(TRIPLE_SLOTS)}, s1/s2, "
                              f"sentence1/sentence2, sentence, text (found: {', '.join(table.column_names)}).")
        texts = [t for c in cols for t in table.column(c).to_pylist()]
    else:
        try:
            texts = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start}); convert it or pass Parquet.") from None
    texts = list(dict.fromkeys(t.strip() for t in texts if isinstance(t, str) and t.strip()))
    if not texts:
        raise ConfigError(f"{path} holds no sentences.")
    return pd.DataFrame({"sentence_id": [sentence_id(t) for t in texts], "sentence": texts})


CONTEXT_COLUMNS = ("sentence_id", "context_id", "left", "right", "rank")


def read_contexts(path: Path) -> pd.DataFrame:
    return read_input_table(path, "Contexts file", "pass a contexts.parquet written by retrieve-contexts",
                            CONTEXT_COLUMNS).select(list(CONTEXT_COLUMNS)).to_pandas()


@dataclass
class TrainedCoherence:
    model: CoherenceModel  # or models.coherence.EncoderHeadCoherence (a head over `encoder`)
    vocab: Vocab  # empty with a frozen encoder
    folder: Path
    metrics: dict
    key: str
    reused: bool
    encoder: str | None = None  # the frozen sentence encoder under the head (CoherenceSettings.encoder), else None
    encoder_precision: str = "float32"  # the frozen encoder's encoding, as the head was fit on it

    def encode(self, texts: list[str], max_len: int = 64, batch_size: int = 256, device: str | None = None
               ) -> np.ndarray:
        """(N, D) float32 encodings the head scores: the BiLSTM's (on the model's device), or the frozen encoder's
        unit vectors (on `device`; None: CUDA when present)."""
        if self.encoder is None:
            from models.coherence import encode_texts

            return encode_texts(self.model, self.vocab, texts, max_len, batch_size)
        return frozen_encode(self.encoder, texts, self.model.dim, precision=self.encoder_precision, device=device)


def frozen_encode(encoder: str, texts: list[str], dim: int = 0, batch_size: int = 128,
                  precision: str = "float32", device: str | None = None) -> np.ndarray:
    """Unit vectors (N, D) float32 of `texts` from a frozen sentence encoder (a registered name or a folder) on
    `device` (None: CUDA when present); `precision` bfloat16: its forward passes under bf16 autocast (the vectors
    come back float32)."""
    import torch

    from tasks.llm.local_models import load_encoder

    if precision not in ("float32", "bfloat16"):
        raise ValueError(f"frozen_encode: precision {precision!r} (resolve 'auto' first: CoherenceSettings.precision)")
    if not len(texts):
        return np.zeros((0, dim), dtype=np.float32)
    model = load_encoder(encoder, device)
    with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16"):
        vectors = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True)
    return vectors.astype(np.float32)


def load_trained(folder: Path) -> TrainedCoherence | None:
    """The coherence model retrieve-contexts trained, from its folder; None when missing or failing its checksum."""
    import torch

    from models.coherence import CoherenceModel, EncoderHeadCoherence, Vocab

    manifest = read_manifest(folder)
    if not manifest or not verify_outputs(folder, manifest):
        return None
    vocab = Vocab(json.loads((folder / "vocab.json").read_text()))
    s = manifest["settings"]
    encoder = manifest.get("encoder")
    if encoder:
        from tasks.llm.local_models import encoder_identity

        encoder = {**encoder, "source": local_path(encoder["source"])}  # a folder is named portably (store.portable)

        if encoder_identity(encoder["source"])[1] != encoder["sha256"]:
            return None  # the encoder under the head is not the one it was fit on: refit (or refuse, in stage 3)
        model = EncoderHeadCoherence(encoder["dim"])
    else:
        model = CoherenceModel(len(vocab), s["embedding_dim"], s["hidden"])
    model.load_state_dict(torch.load(folder / "model.pt", weights_only=True))
    model.eval()
    return TrainedCoherence(model, vocab, folder, manifest["metrics"], manifest["key"], reused=True,
                            encoder=encoder["source"] if encoder else None,
                            encoder_precision=encoder.get("precision", "float32") if encoder else "float32")


@functools.lru_cache(maxsize=4)
def load_trained_cached(folder: str, digest: str) -> TrainedCoherence:
    """Once per worker process; `digest` (the model's sha256) keys the cache so a retrained model is reloaded."""
    trained = load_trained(Path(folder))
    if trained is None:
        raise ConfigError(f"Coherence model at {folder} is missing or fails its checksum; re-run retrieve-contexts "
                          "to retrain it.")
    return trained


PAIRS_SCHEMA = pa.schema([
    ("pair_id", pa.string()), ("unit_id", pa.string()), ("triple_id", pa.string()), ("other_triple_id", pa.string()),
    ("s1_id", pa.string()), ("s1", pa.string()), ("s2_id", pa.string()), ("s2", pa.string()),
    ("relation", pa.string()), ("label", pa.float64()), ("label_calibrated", pa.float64()), ("gold", pa.float64()),
    ("n_contexts", pa.int32()), ("n_contexts_s1", pa.int32()), ("n_contexts_s2", pa.int32()),
    ("label_disc", pa.float64()), ("label_lm_sentence", pa.float64()), ("label_lm_left", pa.float64()),
    ("label_lm_right", pa.float64()), ("context_label", pa.float64()), ("rating", pa.float64()),
    ("tfidf_cosine", pa.float64()), ("teacher_cosine", pa.float64()),  # null unless label.teacher_weight > 0
])
REJECTED_PAIRS_SCHEMA = pa.schema([
    ("pair_id", pa.string()), ("unit_id", pa.string()), ("triple_id", pa.string()), ("other_triple_id", pa.string()),
    ("s1_id", pa.string()),
    ("s1", pa.string()), ("s2_id", pa.string()), ("s2", pa.string()), ("relation", pa.string()),
    ("gold", pa.float64()), ("n_contexts_s1", pa.int32()), ("n_contexts_s2", pa.int32()), ("reason", pa.string()),
    ("detail", pa.string()),
])


def dataset_tables(folder: Path) -> tuple[str, str | None]:
    """(triples.parquet, pairs.parquet or None) of a dataset version written by build-dataset, checked against its
    manifest; ConfigError naming the folder otherwise."""
    manifest = read_manifest(folder)
    if manifest is None or manifest.get("stage") != "build-dataset" or not verify_outputs(folder, manifest):
        raise ConfigError(f"{folder} is not a dataset version (no build-dataset manifest.json, or its files changed): "
                          "pass a folder written by `stsgen build-dataset` (e.g. data/datasets/latest).")
    pairs = folder / "pairs.parquet"
    return str(folder / "triples.parquet"), str(pairs) if pairs.is_file() else None


def dataset_has_pairs(folder: Path) -> bool:
    """Whether a dataset version holds labeled pairs: its runs ran label-pairs and some of their pairs survived. Read
    from build-dataset's manifest counts, not by hashing the version's files: train-surrogate verifies those."""
    manifest = read_manifest(Path(folder)) or {}
    return manifest.get("counts", {}).get("pairs", 0) > 0
