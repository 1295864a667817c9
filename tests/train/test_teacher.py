"""The encoder teacher as a label source (tasks/llm/teacher.py, tasks/train/label_sources.py): its labels are the
teacher's cosines, computed once per pairs content and cached; a teacher folder that is missing or no sentence
encoder, and a label source whose column the pairs lack, fail with one message naming the fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from tasks.core.config import ConfigError
from tasks.core.defaults import DEFAULT_TEACHER, HUB_IDS
from tasks.llm import local_models
from tasks.llm import teacher as teacher_module
from tasks.train.label_sources import regression_targets
from tasks.train.training import LossSettings, TrainSettings

PAIRS = pd.DataFrame({"s1": ["a cat sat on the mat", "the dog ran", "a cat sat on the mat"],
                      "s2": ["a cat sat on a mat", "stocks fell sharply", "the dog ran"],
                      "label": [0.9, 0.1, 0.2], "rating": [4.5, 0.5, 1.0], "context_label": [0.8, 0.2, 0.3]})


def test_teacher_labels_are_its_cosines_computed_once_and_cached(tiny_encoder_dir, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    monkeypatch.setenv("STSGEN_HOME", str(tmp_path / "home"))
    labelled, identity = regression_targets(PAIRS, "teacher", str(tiny_encoder_dir))
    model = SentenceTransformer(str(tiny_encoder_dir))
    a, b = (model.encode(PAIRS[c].tolist(), normalize_embeddings=True) for c in ("s1", "s2"))
    np.testing.assert_allclose(labelled["label"], np.clip((a * b).sum(axis=1), 0, 1), atol=1e-5)
    assert labelled["teacher_label"].tolist() == labelled["label"].tolist()
    assert identity["cached"] is False and len(identity["sha256"]) == 64
    # a folder's name, never its local path (cards are published)
    assert identity["teacher"] == tiny_encoder_dir.name and str(tiny_encoder_dir.parent) not in str(identity)

    cache = list((tmp_path / "home" / "teacher-labels").glob("*.parquet"))
    assert len(cache) == 1
    again, identity = regression_targets(PAIRS, "teacher", str(tiny_encoder_dir))
    assert identity["cached"] is True and again["label"].tolist() == labelled["label"].tolist()
    regression_targets(PAIRS.iloc[:2], "teacher", str(tiny_encoder_dir))  # other pairs: labelled anew
    assert len(list((tmp_path / "home" / "teacher-labels").glob("*.parquet"))) == 2


def test_the_label_cache_is_keyed_by_the_teachers_content_not_its_folder(tiny_encoder_dir, tmp_path, monkeypatch):
    """The same weights in another folder reuse the cached labels; other weights (one embedding table moved) under
    the same pairs are labelled anew, with other labels — a key without the teacher's sha256 would hand back the
    first teacher's labels."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    monkeypatch.setenv("STSGEN_HOME", str(tmp_path / "home"))
    first, identity = regression_targets(PAIRS, "teacher", str(tiny_encoder_dir))
    assert identity["cached"] is False
    moved = shutil.copytree(tiny_encoder_dir, tmp_path / "moved-teacher")
    again, moved_identity = regression_targets(PAIRS, "teacher", str(moved))
    assert moved_identity["cached"] is True and moved_identity["sha256"] == identity["sha256"]
    assert again["label"].tolist() == first["label"].tolist()

    other = shutil.copytree(tiny_encoder_dir, tmp_path / "other-teacher")
    weights = load_file(other / "model.safetensors")
    name = next(n for n in weights if n.endswith("word_embeddings.weight"))
    weights[name] = weights[name] + torch.randn(weights[name].shape, generator=torch.Generator().manual_seed(0))
    save_file(weights, other / "model.safetensors", metadata={"format": "pt"})
    relabelled, other_identity = regression_targets(PAIRS, "teacher", str(other))
    assert other_identity["sha256"] != identity["sha256"] and other_identity["cached"] is False
    assert not np.allclose(relabelled["label"], first["label"], atol=1e-3)
    assert len(list((tmp_path / "home" / "teacher-labels").glob("*.parquet"))) == 2


def test_stage_three_label_sources_read_their_column():
    rating, _ = regression_targets(PAIRS, "rating", "unused")
    assert rating["label"].tolist() == [0.9, 0.1, 0.2]  # 0–5 onto the cosine scale
    context, _ = regression_targets(PAIRS, "context_label", "unused")
    assert context["label"].tolist() == PAIRS["context_label"].tolist()
    assert regression_targets(PAIRS, "label", "unused")[0] is PAIRS
    rated_only = PAIRS.assign(context_label=[None, 0.2, None])  # label.method='llm_rating' leaves it empty
    with pytest.raises(ConfigError, match=r"p.parquet: label_source 'context_label' needs a value in every row, and 2 "
                                          r"of 3 are empty"):
        regression_targets(rated_only, "context_label", "unused", pairs_file="p.parquet")
    with pytest.raises(ConfigError, match=r"old-pairs.parquet: label_source 'context_label' needs a 'context_label'"):
        regression_targets(PAIRS.drop(columns="context_label"), "context_label", "unused", pairs_file="old-pairs.parquet")


def test_bad_teachers_fail_with_one_message_naming_the_fix(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="does not exist"):
        teacher_module.teacher_folder(str(tmp_path / "nowhere"))
    (tmp_path / "not-an-encoder").mkdir()
    (tmp_path / "not-an-encoder" / "config.json").write_text("{}")
    (tmp_path / "not-an-encoder" / "notes.txt").write_text("weights elsewhere")
    with pytest.raises(ConfigError, match="is not a sentence encoder"):
        teacher_module.teacher_folder(str(tmp_path / "not-an-encoder"))
    monkeypatch.setattr(local_models, "teachers_dir", lambda: tmp_path / "no-teachers")
    with pytest.raises(ConfigError, match=r"not installed.*\./stsgen teacher fetch"):
        teacher_module.teacher_folder()
    with pytest.raises(ValidationError, match="losses.regression is 0"):
        TrainSettings(label_source="teacher", losses=LossSettings())  # the triples alone: no regression to target
    TrainSettings(label_source="teacher")  # the recipe has the regression: fine


def install_fake_teacher(tmp_path, monkeypatch):
    """What `./stsgen teacher fetch` leaves (a folder with config.json and weights), under a teachers_dir of the test's
    own; returns the folder."""
    folder = tmp_path / "teachers" / DEFAULT_TEACHER
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    monkeypatch.setattr(local_models, "teachers_dir", lambda: tmp_path / "teachers")
    return folder


def test_the_teacher_trains_as_a_larger_student_by_its_name(tmp_path, monkeypatch):
    """backbone.source 'all-mpnet-base-v2' finds the folder `./stsgen teacher fetch` assembled, and names the model,
    never its path, as the backbone's source; missing, it says how to fetch it."""
    from tasks.train.backbones import backbone_identity
    from tasks.train.settings import BackboneSettings

    settings = BackboneSettings(kind="encoder", source=DEFAULT_TEACHER)
    monkeypatch.setattr(local_models, "teachers_dir", lambda: tmp_path / "no-teachers")
    with pytest.raises(ConfigError, match=r"not installed.*\./stsgen teacher fetch"):
        backbone_identity(settings)
    folder = install_fake_teacher(tmp_path, monkeypatch)
    info = backbone_identity(settings)
    assert info["path"] == str(folder) and info["source"] == DEFAULT_TEACHER and len(info["sha256"]) == 64
    assert HUB_IDS[DEFAULT_TEACHER] == "sentence-transformers/all-mpnet-base-v2"  # the model card's base model


def test_the_pipeline_with_the_teacher_as_its_student_finds_it_before_stage_1(tmp_path, monkeypatch):
    """sts-pipeline's pattern report measures the backbone's cosine: with the larger student named, the plan (before
    stage 1) finds the teacher's folder or says how to fetch it, and the report encodes with that folder."""
    from tasks.generate.settings import GenerateSettings
    from tasks.label.settings import LabelSettings
    from tasks.pipeline import plan_pipeline
    from tasks.report.stage import prepare_patterns
    from tasks.retrieve.settings import RetrieveSettings
    from tasks.train.settings import BackboneSettings

    train = TrainSettings(backbone=BackboneSettings(kind="encoder", source=DEFAULT_TEACHER))
    stages = (GenerateSettings(), RetrieveSettings(), LabelSettings(), train, None)
    monkeypatch.setattr(local_models, "teachers_dir", lambda: tmp_path / "no-teachers")
    with pytest.raises(ConfigError, match=r"not installed.*\./stsgen teacher fetch"):
        plan_pipeline(*stages)
    folder = install_fake_teacher(tmp_path, monkeypatch)
    plan = plan_pipeline(*stages)
    triples = tmp_path / "triples.parquet"
    triples.write_bytes(b"triples")
    assert plan.report_encoder == DEFAULT_TEACHER
    assert prepare_patterns(str(triples), plan.report_encoder).inputs[1]["path"] == str(folder)
