"""Stage 3's scoring LM: which one (`resolve_lm`: its files and identity), how manifests name it (`lm_public`), and
loading it once per process (`load_scorer`: transformers or llama.cpp in-process, or the served LM of
`label.lm_endpoint`). The scoring maths that uses it is tasks/label/labeling.py's."""

from __future__ import annotations

import functools
from pathlib import Path

from models.causal_lm import CausalLM, TokenizedLM, load_causal_lm
from models.llama_cpp_lm import load_llama_cpp_lm
from tasks.core.device import resolve_device, resolve_lm_dtype
from tasks.core.store import fingerprint
from tasks.label.settings import LabelSettings, ScoringEndpoint
from tasks.llm.endpoint import endpoint_kind
from tasks.llm.local_models import resolve_model_files
from tasks.llm.served_lm import ServedLM, served_lm


def lm_public(settings: LabelSettings) -> str:
    """The scoring LM as manifests and artifacts show it: a served LM by endpoint kind and model, never its URL (it
    may embed credentials)."""
    served = settings.lm_endpoint
    return settings.lm if served is None else f"endpoint ({endpoint_kind(served.base_url)}): {served.model}"


def resolve_lm(settings: LabelSettings) -> tuple[Path, str]:
    """(path, identity) of the scoring LM: its files and their sha256, or for an endpoint the tokenizer's files and
    a fingerprint of the served model name and that tokenizer (the endpoint's URL does not change the scores)."""
    path, sha = resolve_model_files(settings.lm)
    if settings.lm_endpoint is None:
        return path, sha
    return path, fingerprint({"served_model": settings.lm_endpoint.model, "tokenizer": sha})


@functools.lru_cache(maxsize=2)
def cached_lm(path: str, sha256: str, dtype: str, threads: int | None, device: str = "cpu") -> CausalLM:
    # `sha256` keys the cache so a replaced file at the same path is reloaded. dtype 'auto' is resolved here for
    # callers that skip the stage (which resolves it before its key).
    import torch

    lm = load_causal_lm(Path(path), resolve_lm_dtype(dtype, torch.device(device)), threads)
    lm.model.to(device)
    return lm


@functools.lru_cache(maxsize=2)
def cached_served_lm(llm: ScoringEndpoint, tokenizer_path: str, start_token: str) -> ServedLM:
    return served_lm(llm, Path(tokenizer_path), start_token)


@functools.lru_cache(maxsize=2)
def cached_llama_cpp_lm(path: str, sha256: str, threads: int | None) -> TokenizedLM:
    return load_llama_cpp_lm(Path(path), threads)


def load_scorer(settings: LabelSettings, path: str, identity: str) -> TokenizedLM:
    """The LM that scores (s, c): in-process (llama.cpp, or transformers on settings.device), or the endpoint of
    label.lm_endpoint (probed once)."""
    if settings.lm_endpoint is not None:
        return cached_served_lm(settings.lm_endpoint, path, settings.start_token)
    if settings.scorer == "llama_cpp":
        return cached_llama_cpp_lm(path, identity, settings.threads)
    return cached_lm(path, identity, settings.dtype, settings.threads, str(resolve_device(settings.device)))
