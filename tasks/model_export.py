"""Trained surrogates as folders that `sentence_transformers.SentenceTransformer(path)` loads.

Encoder backbones are written through sentence-transformers' own modules (Transformer → mean Pooling), so the
folder is a standard sentence-transformers model. BeLLM folders are sentence-transformers folders with one custom
module (`models.bellm_sentence_transformer.BeLLMModule`: the decoder, its tokenizer and `stsgen_bellm.json`), loaded
with `SentenceTransformer(folder, trust_remote_code=True)` where stsgen is installed, or with `load_bellm`.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from models.bellm import BeLLMEncoder
from models.bellm_sentence_transformer import CONFIG_FILE, BeLLMModule, load_bellm_encoder
from models.mean_pooling_encoder import MeanPoolingEncoder

BELLM_MARKER = CONFIG_FILE  # the file that marks a BeLLM export (`stsgen eval` rebuilds those with load_bellm)


@contextmanager
def _staged(folder: Path):
    """A staging folder beside `folder`; on success it replaces `folder` whole (complete or not at all, never mixed
    with an older export)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        staged = Path(tmp) / "model"
        yield staged
        if folder.exists():
            shutil.rmtree(folder)
        staged.rename(folder)


def export_bellm(module: BeLLMEncoder, folder: Path) -> Path:
    from sentence_transformers import SentenceTransformer

    with _staged(folder) as staged:
        SentenceTransformer(modules=[BeLLMModule(module)], device="cpu").save(str(staged))
    return folder


def load_bellm(folder: Path) -> BeLLMEncoder:
    return load_bellm_encoder(folder)


def export_encoder(module: MeanPoolingEncoder, folder: Path) -> Path:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st_models

    with _staged(folder) as staged, tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        hf = Path(tmp) / "hf"
        module.encoder.save_pretrained(hf)
        module.tokenizer.save_pretrained(hf)
        transformer = st_models.Transformer(str(hf), max_seq_length=module.max_length)
        pooling = st_models.Pooling(module.dim, pooling_mode="mean")
        SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(staged))
    return folder
