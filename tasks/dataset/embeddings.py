"""Encoder embeddings cached by sentence content: a weekly build re-embeds only the sentences new since the last one
(the evaluation sets and earlier runs' anchors are read back), which keeps a 10-run build within seconds on 2 cores.

One Parquet per encoder (by the sha256 of its files) under $STSGEN_HOME/embeddings/: sentence_id → unit vector.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.contracts import sentence_id
from tasks.core.home import stsgen_home
from tasks.core.store import write_parquet
from tasks.llm.local_models import encoder_identity, load_encoder


def cache_path(encoder: str) -> Path:
    return stsgen_home() / "embeddings" / f"{encoder_identity(encoder)[1][:16]}.parquet"


def encode_cached(texts: list[str], encoder: str, batch_size: int = 128) -> tuple[np.ndarray, int]:
    """(unit vectors of `texts` in order, how many had to be encoded now); the new ones are added to the cache."""
    path = cache_path(encoder)
    ids = [sentence_id(t) for t in texts]
    cached: dict[str, np.ndarray] = {}
    if path.is_file():
        table = pq.read_table(path)
        matrix = np.asarray(table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False),
                            dtype=np.float32).reshape(table.num_rows, -1)
        cached = dict(zip(table.column("sentence_id").to_pylist(), matrix))
    missing = list(dict.fromkeys(i for i in ids if i not in cached))
    if missing:
        text_of = dict(zip(ids, texts))
        vectors = load_encoder(encoder).encode([text_of[i] for i in missing], batch_size=batch_size, convert_to_numpy=True,
                                        normalize_embeddings=True).astype(np.float32)
        cached.update(zip(missing, vectors))
        keys = list(cached)
        stacked = np.stack([cached[k] for k in keys])
        vector_type = pa.list_(pa.float32(), stacked.shape[1])
        write_parquet(path, pa.table({"sentence_id": keys, "vector": pa.FixedSizeListArray.from_arrays(
            pa.array(stacked.ravel()), type=vector_type)}))
    if not ids:
        return np.zeros((0, 0), dtype=np.float32), 0
    return np.stack([cached[i] for i in ids]), len(missing)
