"""Causal-LM log-probabilities of text segments read after a shared prefix (the generative terms of Sun et
al. 2022, Eq. 3).

A *group* is one prefix (token ids) and the continuations scored after it; a continuation is a list of segments
(token-id lists) read one after another. For every continuation the scorer returns, per segment, the summed
log-probability of its tokens and their count: log p(seg_k | prefix, seg_1 … seg_k-1).

Batching (`score_groups`): prefixes, sorted by length, run in batches (right-padded) once; their key/value caches are
then gathered one row per continuation, and the continuations — sorted by length so batches carry little padding —
run on top with explicit position ids. Prefix padding is masked, never attended to; the vocabulary projection runs
only at real token positions. `score_one` is the plain reference: one unpadded forward pass per sequence.

Inputs are token ids; no Prefect in here. Loading: a transformers folder, or a GGUF file (dequantized by
transformers, which needs the `gguf` package).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, DynamicCache


@dataclass
class TokenizedLM:
    """What every scorer of the labeler shares: the tokenizer that turns texts into the segments it scores. The
    in-process `CausalLM` and a served endpoint (tasks/llm/served_lm.py) both score token ids, so their segment
    boundaries are the same."""

    tokenizer: object
    path: Path

    @property
    def device(self) -> torch.device:
        """Where the scoring runs (a served scorer's work is not on this machine: CPU batch sizes apply)."""
        return torch.device("cpu")

    @property
    def start_ids(self) -> list[int]:
        """One document-start token before every prefix, so the first real token is predicted too."""
        tok = self.tokenizer
        start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        return [] if start is None else [int(start)]

    def start_for(self, token: str = "bos") -> list[int]:
        """The start prefix: 'bos' (start_ids), 'eos' (the tokenizer's end-of-text token), or a literal special token
        of the vocabulary such as '<|endoftext|>' — the document separator a base model saw in pretraining."""
        tok = self.tokenizer
        if token == "bos":
            return self.start_ids
        ids = [tok.eos_token_id] if token == "eos" else [tok.convert_tokens_to_ids(token)]
        # Unknown tokens map to the unk id, whose own text differs (SmolLM2's unk is <|endoftext|> itself).
        if ids[0] is None or token not in ("eos", tok.convert_ids_to_tokens(ids[0])):
            raise ValueError(f"start_token '{token}' is not a token of {self.path.name}'s vocabulary; use 'bos', "
                             "'eos' or one of its special tokens")
        return [int(ids[0])]

    def encode(self, texts: list[str], max_tokens: int, keep: str = "start") -> list[list[int]]:
        """Token ids without special tokens, cut to `max_tokens` keeping the start or the end of each text."""
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [(x[:max_tokens] if keep == "start" else x[-max_tokens:]) or [self.tokenizer.eos_token_id or 0]
                for x in ids]

    def score(self, groups: list["Group"], max_batch_tokens: int = 2048) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per group: (sums, counts), each (n_continuations, n_segments) — see `score_groups`."""
        raise NotImplementedError


def pretrained_source(path: Path) -> tuple[Path, dict]:
    """(folder, from_pretrained kwargs) of a transformers folder or a .gguf file."""
    if path.suffix == ".gguf":
        return path.parent, {"gguf_file": path.name}
    return path, {}


def load_tokenizer(path: Path) -> TokenizedLM:
    """Only the tokenizer of a transformers folder or .gguf file (a served model's, scored elsewhere)."""
    folder, kwargs = pretrained_source(path)
    return TokenizedLM(tokenizer=AutoTokenizer.from_pretrained(folder, **kwargs), path=path)


@dataclass
class CausalLM(TokenizedLM):
    model: torch.nn.Module = None

    @property
    def device(self) -> torch.device:
        return self.model.device

    def score(self, groups: list["Group"], max_batch_tokens: int = 2048) -> list[tuple[np.ndarray, np.ndarray]]:
        """`score_groups` on this model (the interface the labeler calls on any scorer)."""
        return score_groups(self, groups, max_batch_tokens)


def load_causal_lm(path: Path, dtype: str = "float32", threads: int | None = None) -> CausalLM:
    """A causal LM from a transformers folder or a .gguf file, in eval mode."""
    if threads:
        torch.set_num_threads(threads)
    folder, kwargs = pretrained_source(path)
    config = AutoConfig.from_pretrained(folder, **kwargs)
    archs = getattr(config, "architectures", None) or []
    # An encoder folder (e.g. BertModel) would load as a "causal LM" with a fresh, untrained head: refuse it.
    if archs and not any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        raise ValueError(f"{path} is not a causal LM (architectures: {', '.join(archs)}); the labeler needs a "
                         "decoder LM such as a *ForCausalLM folder or a GGUF file")
    tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype), **kwargs)
    model.eval()
    # The scorer applies the output projection itself: models that post-process their logits would be scored wrong.
    for attr in ("final_logit_softcapping", "logit_scale", "logits_scaling"):
        if getattr(model.config, attr, None) not in (None, 1, 1.0):
            raise ValueError(f"{path}: the model post-processes its logits ({attr}); the scorer does not support it")
    lm = CausalLM(model=model, tokenizer=tokenizer, path=path)
    if not lm.start_ids:
        raise ValueError(f"{path}: the tokenizer has neither a BOS nor an EOS token to start a text with")
    return lm


@dataclass
class Group:
    prefix: list[int]
    continuations: list[list[list[int]]]  # each: segments, read in order


def _pad(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (pad id 0, always masked) and the attention mask."""
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def _batches(items: list, lengths: list[int], max_tokens: int):
    """Consecutive runs of (length-sorted) items whose padded size rows × longest stays within max_tokens."""
    batch, longest = [], 0
    for item, n in zip(items, lengths):
        if batch and (len(batch) + 1) * max(longest, n) > max_tokens:
            yield batch
            batch, longest = [], 0
        batch.append(item)
        longest = max(longest, n)
    if batch:
        yield batch


def _token_logprobs(lm: CausalLM, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p(target) from hidden states (T, D) → (T,), with the vocabulary projection only on these rows."""
    logits = lm.model.get_output_embeddings()(hidden).float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


@torch.inference_mode()
def score_groups(lm: CausalLM, groups: list[Group], max_batch_tokens: int = 2048
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group: (sums, counts), each (n_continuations, n_segments): summed log-probs and token counts. Runs on the
    model's device; the sums are taken in float64 on the CPU."""
    decoder = lm.model.get_decoder()
    device = lm.model.device
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for g in groups:
        n_seg = max((len(c) for c in g.continuations), default=0)
        out.append((np.zeros((len(g.continuations), n_seg)), np.zeros((len(g.continuations), n_seg), dtype=np.int64)))
    order = sorted(range(len(groups)), key=lambda i: len(groups[i].prefix))
    for batch in _batches(order, [len(groups[i].prefix) for i in order], max_batch_tokens):
        ids, mask = (t.to(device) for t in _pad([groups[i].prefix for i in batch]))
        positions = torch.arange(ids.shape[1], device=device).expand_as(ids)
        prefix_out = decoder(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        lengths = mask.sum(1)
        last_hidden = prefix_out.last_hidden_state[torch.arange(len(batch), device=device), lengths - 1]  # predicts token 1 of cont.
        layers = [(layer.keys, layer.values) for layer in prefix_out.past_key_values.layers]

        rows = [(b, c) for b, gi in enumerate(batch) for c in range(len(groups[gi].continuations))]
        flat = {r: [t for seg in groups[batch[r[0]]].continuations[r[1]] for t in seg] for r in rows}
        rows.sort(key=lambda r: len(flat[r]))
        for chunk in _batches(rows, [len(flat[r]) + ids.shape[1] for r in rows], max_batch_tokens):
            owner = torch.tensor([b for b, _ in chunk], device=device)
            cont_ids, cont_mask = (t.to(device) for t in _pad([flat[r] for r in chunk]))
            cache = DynamicCache(ddp_cache_data=[(k[owner], v[owner]) for k, v in layers])
            cont_out = decoder(
                input_ids=cont_ids, attention_mask=torch.cat([mask[owner], cont_mask], dim=1),
                position_ids=lengths[owner, None] + torch.arange(cont_ids.shape[1], device=device),
                past_key_values=cache,
                use_cache=True)
            # The state before token j predicts token j: the prefix's last state, then the continuation's own.
            states = torch.cat([last_hidden[owner, None], cont_out.last_hidden_state[:, :-1]], dim=1)
            valid = cont_mask.bool()
            logp = torch.zeros(cont_ids.shape, dtype=torch.float64)
            logp[valid.cpu()] = _token_logprobs(lm, states[valid], cont_ids[valid]).double().cpu()
            for row, (b, c) in enumerate(chunk):
                sums, counts = out[batch[b]]
                start = 0
                for k, seg in enumerate(groups[batch[b]].continuations[c]):
                    sums[c, k] = float(logp[row, start : start + len(seg)].sum())
                    counts[c, k] = len(seg)
                    start += len(seg)
    return out


@torch.inference_mode()
def score_one(lm: CausalLM, prefix: list[int], segments: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Reference: one unpadded forward pass over prefix + segments; (sums, counts) per segment."""
    seq = torch.tensor([prefix + [t for seg in segments for t in seg]], dtype=torch.long, device=lm.model.device)
    logits = lm.model(input_ids=seq).logits[0].float().cpu()
    seq = seq.cpu()
    logp = torch.log_softmax(logits[:-1], dim=-1).gather(-1, seq[0, 1:, None]).squeeze(-1)
    sums, counts, start = [], [], len(prefix) - 1
    for seg in segments:
        sums.append(float(logp[start : start + len(seg)].sum()))
        counts.append(len(seg))
        start += len(seg)
    return np.array(sums), np.array(counts)
