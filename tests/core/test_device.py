"""The `device` setting of the torch stages: `auto` picks the CPU here, an explicit CUDA device on a machine without
one is one clear error before any work (every stage flow and the CLI), the device is never part of a cache key, and —
only where CUDA is present — the GPU paths give the CPU's results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from pydantic import ValidationError

from tasks.core import device as device_module
from tasks.core.config import ConfigError, key_fields
from tasks.core.device import (
    autocast,
    device_info,
    resolve_device,
    resolve_lm_dtype,
    resolve_train_precision,
    scaled_batch,
)
from tasks.label.settings import LabelSettings
from tasks.retrieve.coherence import CoherenceSettings, model_key
from tasks.train.settings import TrainSettings

NO_CUDA = not torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(NO_CUDA, reason="needs a CUDA GPU")


@pytest.mark.skipif(not NO_CUDA, reason="checks the CPU-only machine")
def test_auto_picks_the_cpu_and_cuda_is_a_clear_error():
    assert resolve_device("auto") == torch.device("cpu") == resolve_device("cpu")
    for setting in ("cuda", "cuda:1"):
        with pytest.raises(ConfigError, match=rf"device '{setting}' was asked for.*no CUDA GPU.*'auto' or 'cpu'"):
            resolve_device(setting)
    cpu = resolve_device("cpu")
    assert scaled_batch(64, cpu) == 64 and device_info(cpu) == {"device": "cpu", "torch": torch.__version__}
    with autocast(cpu):  # nothing changes on the CPU
        assert torch.ones(2, 2).matmul(torch.ones(2, 2)).dtype == torch.float32


def test_labeler_dtype_auto_is_bf16_only_where_it_is_native(monkeypatch):
    cpu = torch.device("cpu")
    assert resolve_lm_dtype("float32", cpu) == "float32" and resolve_lm_dtype("bfloat16", None) == "bfloat16"
    assert resolve_lm_dtype("auto", None) == "float32"  # llama.cpp or a served LM: no torch dtype to pick
    for native, dtype in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda native=native: native)
        assert resolve_lm_dtype("auto", cpu) == dtype
    assert LabelSettings().dtype == "auto"
    with pytest.raises(ValidationError, match="dtype"):
        LabelSettings(dtype="float16")


def test_training_precision_auto_is_bf16_only_where_it_is_native_and_keys_only_bf16(monkeypatch):
    """The surrogate trains under bf16 autocast only where bf16 is native; float32 stays out of the key (a training
    from before the setting keeps its key), bfloat16 enters it (other numbers: another training)."""
    cpu = torch.device("cpu")
    assert resolve_train_precision("float32", cpu) == "float32" and resolve_train_precision("bfloat16", cpu) == \
        "bfloat16"
    for native, precision in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda native=native: native)
        assert resolve_train_precision("auto", cpu) == precision
    assert TrainSettings().precision == "auto"
    assert "precision" not in key_fields(TrainSettings(precision="float32"))
    assert key_fields(TrainSettings(precision="bfloat16"))["precision"] == "bfloat16"
    with pytest.raises(ValidationError, match="precision"):
        TrainSettings(precision="float16")


def test_bad_spellings_are_refused_by_every_settings_class_and_the_cli(capsys):
    from flows.cli import main

    for cls in (TrainSettings, CoherenceSettings, LabelSettings):
        with pytest.raises(ValidationError, match="device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu'"):
            cls(device="gpu")
        assert cls(device="cuda:0").device == "cuda:0"  # spelling only: availability is checked when it is used
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--device", "gpu"])
    assert exit_.value.code == 2 and "device must be 'auto'" in capsys.readouterr().err


def test_device_flag_reaches_every_torch_stage_of_the_main_job():
    from flows.cli import build_parser
    from flows.cli.stages import pipeline_settings
    from flows.presets import PRESETS

    settings = pipeline_settings(build_parser().parse_args(["run", "--device", "cpu", "--preset", "quick"]))
    assert settings["retrieve"].coherence.device == settings["train"].device == "cpu"
    assert settings["label"].device == "cpu"
    # Everything else is the preset's: only the device changed.
    quick = PRESETS["quick"]
    # the coherence model is the one prepare-corpus builds (its settings' defaults): only the device changed
    assert settings["retrieve"].coherence == CoherenceSettings(device="cpu") and "retrieve" not in quick
    assert settings["train"].steps == quick["train"]["steps"]
    default = pipeline_settings(build_parser().parse_args(["run", "--preset", "full"]))
    assert default["retrieve"].coherence == CoherenceSettings() and default["train"].device == "auto"


def test_the_device_is_not_part_of_any_cache_key():
    assert model_key("corpus", CoherenceSettings(device="cpu"), 1) == model_key("corpus", CoherenceSettings(), 1)
    bilstm = CoherenceSettings(encoder="bilstm")
    assert model_key("corpus", bilstm.model_copy(update={"device": "cpu"}), 1) == model_key("corpus", bilstm, 1)
    assert model_key("corpus", CoherenceSettings(encoder="bilstm", epochs=3), 1) != model_key("corpus", bilstm, 1)


@pytest.mark.skipif(not NO_CUDA, reason="checks the CPU-only machine")
def test_every_torch_stage_fails_on_cuda_before_any_work(prefect_harness, tmp_path, tiny_lm_dir):
    """Each stage flow refuses device='cuda' here before it reads its inputs or writes anything (the inputs below do
    not even exist: the device error must come first)."""
    from flows.label_pairs import label_pairs
    from flows.retrieve_contexts import retrieve_contexts
    from flows.train_surrogate import train_surrogate
    from tasks.retrieve.settings import RetrieveSettings

    missing = str(tmp_path / "missing.parquet")
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="device 'cuda'"):
        train_surrogate(triples=missing, settings=TrainSettings(device="cuda"), output_dir=str(out))
    with pytest.raises(ConfigError, match="device 'cuda'"):
        retrieve_contexts(sentences=missing, settings=RetrieveSettings(coherence=CoherenceSettings(device="cuda")),
                          output_dir=str(out))
    triples = tmp_path / "triples.parquet"
    pq.write_table(pa.Table.from_pandas(pd.DataFrame({
        "source_id": ["a"], "anchor": ["the river flooded the town ."], "positive": ["the town was flooded ."],
        "intermediate": ["the river flooded ."], "negative": ["the town stayed dry ."]})), triples)
    contexts = tmp_path / "contexts.parquet"
    with pytest.raises(ConfigError, match="device 'cuda'"):
        label_pairs(contexts=str(contexts), triples=str(triples), output_dir=str(out),
                    settings=LabelSettings(method="context", lm=str(tiny_lm_dir), lambda_disc=0, device="cuda"))
    with pytest.raises(ConfigError, match="device 'cuda'"):  # the rating's teacher partner encodes on label.device
        label_pairs(contexts=str(contexts), triples=str(triples), output_dir=str(out),  # (llama.cpp scores on the CPU)
                    settings=LabelSettings(lm=str(tiny_lm_dir), scorer="llama_cpp", rating_weight=0.5,
                                           tfidf_weight=0.0, teacher_weight=0.5, device="cuda"))
    assert not out.exists()


@needs_cuda
def test_gpu_paths_match_the_cpu(tiny_lm_dir, tiny_encoder_dir):
    """Run only where CUDA is present: the labeler's scores, the coherence model's encodings and a surrogate's
    embeddings on the GPU agree with the CPU's."""
    from models.causal_lm import Group, load_causal_lm, score_groups
    from models.coherence import CoherenceModel, Vocab, encode_texts
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer

    cuda = resolve_device("cuda")
    lm = load_causal_lm(tiny_lm_dir)
    ids = lm.encode(["the river flooded the town", "critics praised the strings", "prices rose"], 16)
    groups = [Group(prefix=lm.start_ids + ids[0], continuations=[[ids[1]], [ids[2], ids[1]]])]
    cpu_sums, _ = score_groups(lm, groups)[0]
    lm.model.to(cuda)
    gpu_sums, _ = score_groups(lm, groups)[0]
    assert np.allclose(cpu_sums, gpu_sums, atol=1e-3)

    texts = ["the river flooded the town .", "critics praised the strings ."]
    vocab = Vocab.build(pd.Series(texts), min_count=1)
    model = CoherenceModel(len(vocab), 16, 16)
    on_cpu = encode_texts(model, vocab, texts)
    # cuDNN's LSTM runs its matrix products in TF32 by default (~3e-4 relative): seen 1e-4 apart on an H100
    assert np.allclose(on_cpu, encode_texts(model.to(cuda), vocab, texts), atol=1e-3)

    model, _ = load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir)))
    on_cpu = model.encode(texts)
    on_gpu = model.to(cuda).encode(texts)
    cos = (on_cpu * on_gpu).sum(1) / np.linalg.norm(on_cpu, axis=1) / np.linalg.norm(on_gpu, axis=1)
    assert (cos > 0.99).all()


def test_the_quick_preset_sizes_the_labeler_unless_a_flag_does(monkeypatch):
    from flows.cli import build_parser
    from flows.cli.stages import pipeline_settings
    from flows.presets import PRESETS

    parse = build_parser().parse_args
    assert pipeline_settings(parse(["run"]))["label"].contexts_per_sentence == 8  # --preset quick is the default
    # A preset that also sets the similarity: the flag wins over it; the preset's sizes stay.
    monkeypatch.setitem(PRESETS["quick"], "label", PRESETS["quick"]["label"] | {"similarity": "contrast"})
    settings = pipeline_settings(parse(["run", "--label-method", "context", "--similarity", "rank"]))["label"]
    assert settings.similarity == "rank" and settings.method == "context" and settings.candidates() == 16
    assert settings.contexts_per_sentence == 8
    assert pipeline_settings(parse(["run", "--preset", "full"]))["label"].contexts_per_sentence == 24
