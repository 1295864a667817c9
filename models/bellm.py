"""BeLLM-style sentence encoder from a decoder LM (Li & Li 2024, BeLLM): the sentence is placed in the prompt
`The representative word for sentence {sentence} is:"`, the last n decoder layers attend bidirectionally (their causal
mask removed; n = 0 is the plain causal model), and the final hidden state of the last token is the embedding.

Input: a Llama-style decoder module (`embed_tokens`, `layers`, `rotary_emb`, `norm`, `config`; e.g.
`LlamaForCausalLM(...).model`) and its tokenizer. Sequences are left-padded so the last position is always the
prompt's final token. No Prefect in here.
"""

from __future__ import annotations

import torch
from torch import nn

PROMPT = 'The representative word for sentence {sentence} is:"'
_BEFORE, _AFTER = PROMPT.split("{sentence}")


class BeLLMEncoder(nn.Module):
    def __init__(self, decoder: nn.Module, tokenizer, bidirectional_layers: int = 1, max_length: int = 96):
        super().__init__()
        n_layers = len(decoder.layers)
        if not 0 <= bidirectional_layers <= n_layers:
            raise ValueError(f"bidirectional_layers must be in 0..{n_layers} (the decoder's layers), got "
                             f"{bidirectional_layers}: set backbone.bidirectional_layers / --bidirectional-layers")
        self.decoder, self.tokenizer = decoder, tokenizer
        self.bidirectional_layers, self.max_length = bidirectional_layers, max_length
        self.first_bidirectional = n_layers - bidirectional_layers
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token

    @property
    def dim(self) -> int:
        return self.decoder.config.hidden_size

    def tokenize(self, sentences: list[str]) -> dict[str, torch.Tensor]:
        """Prompt ids around the sentence's ids, the sentence cut to fit `max_length` (never the prompt: the last
        token must be the closing quote), left-padded."""
        tok = self.tokenizer
        before = tok(_BEFORE.rstrip(), add_special_tokens=False)["input_ids"]
        after = tok(_AFTER, add_special_tokens=False)["input_ids"]
        room = max(self.max_length - len(before) - len(after), 1)
        body = tok([" " + s.strip() for s in sentences], add_special_tokens=False)["input_ids"]
        seqs = [before + ids[:room] + after for ids in body]
        width = max(len(x) for x in seqs)
        ids = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, x in enumerate(seqs):
            ids[i, width - len(x):] = torch.tensor(x, dtype=torch.long)
            mask[i, width - len(x):] = 1
        return {"input_ids": ids, "attention_mask": mask}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The hidden state of each sequence's last real token. `tokenize` pads on the left (the last position is the
        prompt's closing quote), but sentence-transformers' losses may merge columns into one batch and pad the
        narrower ones on the right: the position is read from the mask, not assumed."""
        hidden = self.hidden_states(input_ids, attention_mask)
        width = attention_mask.shape[1]
        last = width - 1 - attention_mask.flip(-1).long().argmax(-1)  # index of the last 1 in each row
        return hidden[torch.arange(len(hidden), device=hidden.device), last]

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Final hidden states at every position (B, L, D)."""
        # Imported here: transformers.masking_utils pulls in torch._dynamo (~1.5 s), which every pipeline process
        # would otherwise pay at import whether or not it trains a BeLLM.
        from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

        d = self.decoder
        hidden = d.embed_tokens(input_ids)
        positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        causal = create_causal_mask(config=d.config, inputs_embeds=hidden, attention_mask=attention_mask,
                                    past_key_values=None, position_ids=positions)
        bidirectional = create_bidirectional_mask(config=d.config, inputs_embeds=hidden,
                                                  attention_mask=attention_mask)
        rope = d.rotary_emb(hidden, position_ids=positions)
        for i, layer in enumerate(d.layers):
            # sdpa falls back to the module's is_causal flag when a mask is None (no padding): set it per call.
            layer.self_attn.is_causal = i < self.first_bidirectional
            mask = bidirectional if i >= self.first_bidirectional else causal
            hidden = layer(hidden, attention_mask=mask, position_embeddings=rope, position_ids=positions)
        return d.norm(hidden)
