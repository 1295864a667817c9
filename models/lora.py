"""Low-rank adapters (LoRA, Hu et al. 2021) through `peft`, so that CPU training updates a few thousand parameters
instead of all weights. `add_lora` freezes a transformers model and injects adapters into the named linear layers
(transformers' peft integration, the path sentence-transformers' `add_adapter` takes); `merge_lora` folds every
adapter into its layer's weight and removes the adapter layers, so exported folders are plain models.

Why a merge of our own: `merge_and_unload` lives on peft's `PeftModel` wrapper, which the transformers integration
(adapters injected in place, the model keeps its class and attribute paths that the BeLLM encoder and
sentence-transformers' Transformer module rely on) does not create; the merge itself is peft's (`BaseTunerLayer.merge`).

Input: a transformers `PreTrainedModel` (BERT: query/key/value; Llama: q_proj/k_proj/v_proj/o_proj).
"""

from __future__ import annotations

from torch import nn


def add_lora(model: nn.Module, targets: tuple[str, ...], rank: int, alpha: float) -> int:
    """Freeze `model`, add rank-`rank` adapters to every linear layer whose name is in `targets`; returns how many
    layers got one (0: none matched, nothing changed)."""
    from peft import LoraConfig
    from peft.tuners.tuners_utils import BaseTunerLayer

    names = {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    present = sorted(set(targets) & names)
    if not present:
        return 0
    model.requires_grad_(False)
    model.add_adapter(LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=present))
    return sum(isinstance(m, BaseTunerLayer) for m in model.modules())


def merge_lora(root: nn.Module) -> int:
    """Fold every adapter under `root` into its base layer and put the base layer back; returns how many."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    merged = 0
    for parent in list(root.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, BaseTunerLayer):
                child.merge()
                setattr(parent, name, child.get_base_layer())
                merged += 1
    for module in root.modules():  # transformers would otherwise save only the (now removed) adapter weights
        if getattr(module, "_hf_peft_config_loaded", False):
            module._hf_peft_config_loaded = False
            del module.peft_config
    return merged
