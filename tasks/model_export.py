"""Trained surrogates as folders that `sentence_transformers.SentenceTransformer(path)` loads.

Encoder backbones are written through sentence-transformers' own modules (Transformer → mean Pooling), so the
folder is a standard sentence-transformers model. BeLLM folders need the stsgen module (see docs), not covered here.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from models.mean_pooling_encoder import MeanPoolingEncoder


def export_encoder(module: MeanPoolingEncoder, folder: Path) -> Path:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st_models

    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        hf = Path(tmp) / "hf"
        module.encoder.save_pretrained(hf)
        module.tokenizer.save_pretrained(hf)
        transformer = st_models.Transformer(str(hf), max_seq_length=module.max_length)
        pooling = st_models.Pooling(module.dim, pooling_mode="mean")
        staged = Path(tmp) / "model"
        SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(staged))
        if folder.exists():
            shutil.rmtree(folder)
        staged.rename(folder)  # the folder appears complete or not at all
    return folder
