"""Trained surrogates as folders that `sentence_transformers.SentenceTransformer(path)` loads.

Encoder backbones are sentence-transformers' own modules (Transformer → mean Pooling), so the folder is a standard
sentence-transformers model. BeLLM folders are sentence-transformers folders with one custom
module (`models.bellm_sentence_transformer.BeLLMModule`: the decoder, its tokenizer and `stsgen_bellm.json`), loaded
with `SentenceTransformer(folder, trust_remote_code=True)` where stsgen is installed, or with `load_bellm`.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from models.bellm import BeLLMEncoder
from models.bellm_sentence_transformer import CONFIG_FILE, load_bellm_encoder

BELLM_MARKER = CONFIG_FILE  # the file that marks a BeLLM export (`stsgen eval` rebuilds those with load_bellm)
MODEL_FILES = ("modules.json", "config.json", BELLM_MARKER)  # one of them marks a model folder


def is_model_folder(folder: Path) -> bool:
    return any((folder / f).is_file() for f in MODEL_FILES)


def load_model_folder(folder: Path, device: str | None = None):
    """A model folder (ours or any sentence-transformers folder) as a SentenceTransformer. A BeLLM export carries
    stsgen's own module class (its prompt and bidirectional layers): trusted, it is ours."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device=device, trust_remote_code=(folder / BELLM_MARKER).is_file())


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


def export_model(model, folder: Path, card_section: str = "") -> Path:
    """Save a SentenceTransformer (its own model card included) with `card_section` appended to the card."""
    with _staged(folder) as staged:
        model.save(str(staged))
        card = staged / "README.md"
        card.write_text((card.read_text() if card.is_file() else "") + card_section)
    return folder


def load_bellm(folder: Path) -> BeLLMEncoder:
    return load_bellm_encoder(folder)
