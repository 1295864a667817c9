"""Where the torch stages run: the `device` setting of the coherence model (stage 2), the in-process labeler LM
(stage 3) and the surrogate (stage 4).

`auto` is CUDA when torch sees a GPU, else the CPU; `cpu`, `cuda` or `cuda:N` pin it, and asking for CUDA on a machine
without one is a clear error before any work. On a GPU the encoder's forward passes run under bf16 autocast
(float32 on a GPU without bf16: fp16 would need loss scaling in training; the labeler LM has its own `dtype` and the
small BiLSTM stays float32) and inference batches grow (`scaled_batch`); on the CPU nothing changes but the labeler
LM's dtype, the surrogate's training precision and the frozen-encoder ranker's encoding where bf16 is native
(`resolve_lm_dtype`, `resolve_train_precision`). The device is *where* a result is computed, not *what* is computed: it is left out of every cache key (a BiLSTM coherence model trained on a GPU is reused on a CPU) and recorded in
each manifest (`device_info`); a dtype is *what*, so the labeler's resolved dtype and the surrogate's resolved
training precision (bfloat16; float32 stays out) enter their stage keys, as does a frozen-encoder coherence head's
encoding precision its model key — a surrogate trained in bf16 on a GPU is not reused by a CPU without native bf16,
which trains in float32.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator

from tasks.core.config import ConfigError

if TYPE_CHECKING:  # torch is imported where a device is resolved or used: settings that name a device stay light
    import torch

DEVICE_DESCRIPTION = ("Torch device: 'auto' (CUDA if available, else CPU), 'cpu', 'cuda' or 'cuda:N'. Not part of "
                      "any cache key; the device used is recorded in the manifest.")
_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
GPU_BATCH_FACTOR = 8  # inference batches on a GPU: 8× the CPU size (CPU sizes are tuned for 2 cores)


def check_device_setting(value: str) -> str:
    """The pydantic validator of every `device` field: the spelling only (availability is checked when resolved)."""
    if not _PATTERN.match(value):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {value!r}")
    return value


DeviceSetting = Annotated[str, AfterValidator(check_device_setting)]  # the type of every `device` field


def resolve_device(setting: str) -> torch.device:
    """The torch device for a `device` setting; ConfigError when CUDA is asked for and there is none."""
    import torch

    check_device_setting(setting)
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(setting)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise ConfigError(f"device '{setting}' was asked for, but torch {torch.__version__} ({build}) sees no "
                              "CUDA GPU on this machine; set device to 'auto' or 'cpu'.")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device '{setting}': this machine has {torch.cuda.device_count()} CUDA device(s) "
                              f"(cuda:0 … cuda:{torch.cuda.device_count() - 1}); pick one of them or 'auto'.")
    return device


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on a GPU that has bf16; nothing otherwise (float32, as on the CPU)."""
    import torch

    if autocast_precision(device) != "bfloat16":
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=torch.bfloat16)


def autocast_precision(device: torch.device) -> str:
    """The precision `autocast(device)` trains in ('bfloat16' or 'float32'): the reference loop's, and that of every
    training row recorded before `TrainSettings.precision` existed (benchmarks pin it to compare like with like)."""
    import torch

    return "bfloat16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "float32"


def native_bf16(device: torch.device) -> bool:
    """bf16 matrix products run natively here: a CUDA GPU with bf16 (not emulated), or a CPU with AVX-512-BF16 or
    AMX. Elsewhere torch emulates them, several times slower than float32 (docs/results.md)."""
    import torch

    if device.type == "cuda":
        with torch.cuda.device(device):
            return torch.cuda.is_bf16_supported(including_emulation=False)
    return device.type == "cpu" and cpu_has_native_bf16()


def cpu_has_native_bf16() -> bool:
    """x86: AVX-512-BF16 or AMX (oneDNN's own check is true on any AVX-512 CPU, where bf16 is emulated and 2.3×
    slower than float32); elsewhere (aarch64) oneDNN's check, false where torch was built without it."""
    import platform

    import torch

    if platform.machine().lower() in ("x86_64", "amd64", "i686", "x86"):
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_lm_dtype(setting: str, device: torch.device | None) -> str:
    """The labeler LM's dtype for a `dtype` setting: 'auto' is bfloat16 where it is native (1.8× the float32
    scoring speed on an AVX-512-BF16 CPU, labels' Spearman 0.99 with float32: docs/results.md), float32 elsewhere
    and for scorers that are not torch (device None: llama.cpp, a served LM)."""
    if setting != "auto":
        return setting
    return "bfloat16" if device is not None and native_bf16(device) else "float32"


def resolve_train_precision(setting: str, device: torch.device) -> str:
    """The surrogate training's precision for a `precision` setting: 'auto' is bfloat16 autocast where bf16 is native
    (2.0× the float32 training step of all-MiniLM-L6-v2 on an AVX-512-BF16 CPU: docs/results.md), float32
    elsewhere (emulated bf16 is slower than float32)."""
    return resolve_lm_dtype(setting, device)  # the labeler's rule: one test of native bf16 for both


def scaled_batch(batch: int, device: torch.device) -> int:
    """An inference batch size for the device: the CPU-tuned size, larger on a GPU."""
    return batch * GPU_BATCH_FACTOR if device.type == "cuda" else batch


def device_info(device: torch.device) -> dict:
    """The device as a manifest records it."""
    import torch

    info = {"device": str(device), "torch": torch.__version__}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        info |= {"name": torch.cuda.get_device_name(index), "cuda": torch.version.cuda,
                 "autocast": "bfloat16" if torch.cuda.is_bf16_supported() else "off (float32)"}
    return info


def module_device(module: torch.nn.Module) -> torch.device:
    """The device a module's parameters live on (CPU for a module without parameters)."""
    import torch

    return next((p.device for p in module.parameters()), torch.device("cpu"))
