"""Trained surrogates as folders that `sentence_transformers.SentenceTransformer(path)` loads.

Encoder backbones are written through sentence-transformers' own modules (Transformer → mean Pooling), so the
folder is a standard sentence-transformers model. BeLLM folders hold the decoder, its tokenizer and
`stsgen_bellm.json`; `load_bellm` rebuilds the encoder (they are not sentence-transformers folders).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from models.bellm import BeLLMEncoder
from models.mean_pooling_encoder import MeanPoolingEncoder

BELLM_MARKER = "stsgen_bellm.json"


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
    with _staged(folder) as staged:
        module.decoder.save_pretrained(staged)
        module.tokenizer.save_pretrained(staged)
        (staged / BELLM_MARKER).write_text(json.dumps({"bidirectional_layers": module.bidirectional_layers,
                                                       "max_length": module.max_length}))
    return folder


def load_bellm(folder: Path) -> BeLLMEncoder:
    from transformers import AutoModel, AutoTokenizer

    spec = json.loads((folder / BELLM_MARKER).read_text())
    return BeLLMEncoder(AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder), **spec).eval()


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
