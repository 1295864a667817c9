"""A sentence-transformers module around `BeLLMEncoder`, so that a trained BeLLM folder loads with
`SentenceTransformer(folder, trust_remote_code=True)` (stsgen installed; sentence-transformers ≥ 6 asks for
`trust_remote_code` before importing any module class outside its own package, local folders included).

Input: texts (the module tokenizes them into the BeLLM prompt, left-padded). Output: `sentence_embedding`, the final
hidden state of the prompt's last token. Saved files: the decoder (`save_pretrained`), its tokenizer and
`stsgen_bellm.json` (bidirectional_layers, max_length) in the model's root folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from sentence_transformers.base.modules import Module

from models.bellm import BeLLMEncoder

CONFIG_FILE = "stsgen_bellm.json"


class BeLLMModule(Module):
    config_file_name = CONFIG_FILE
    config_keys = ["bidirectional_layers", "max_length"]
    save_in_root = True

    def __init__(self, encoder: BeLLMEncoder):
        super().__init__()
        self.encoder = encoder

    @property
    def bidirectional_layers(self) -> int:
        return self.encoder.bidirectional_layers

    @property
    def max_length(self) -> int:
        return self.encoder.max_length

    @property
    def max_seq_length(self) -> int:
        return self.encoder.max_length

    def tokenize(self, texts, **kwargs) -> dict[str, torch.Tensor]:
        return self.encoder.tokenize([str(t) for t in texts])

    def forward(self, features: dict, **kwargs) -> dict:
        features["sentence_embedding"] = self.encoder(features["input_ids"], features["attention_mask"])
        return features

    def get_sentence_embedding_dimension(self) -> int:
        return self.encoder.dim

    def get_embedding_dimension(self) -> int:
        return self.encoder.dim

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.encoder.decoder.save_pretrained(output_path, safe_serialization=safe_serialization)
        self.encoder.tokenizer.save_pretrained(output_path)
        self.save_config(output_path)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> "BeLLMModule":
        return cls(load_bellm_encoder(Path(model_name_or_path) / subfolder))


def load_bellm_encoder(folder: Path) -> BeLLMEncoder:
    from transformers import AutoModel, AutoTokenizer

    spec = json.loads((folder / CONFIG_FILE).read_text())
    return BeLLMEncoder(AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder), **spec).eval()
