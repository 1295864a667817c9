"""Stage 4's settings: `TrainSettings` (the stage's one settings object: backbone, losses, mining, schedule, the
regression's label source, evaluation) and `LossSettings` (the objective's weights and forms). The training itself is
tasks/train/trainer.py; the data it trains on, tasks/train/training.py.

One recipe for every entry point (`./stsgen train`, sts-pipeline, train-on-dataset): TrainSettings' defaults, and
`for_data`, the one rule for data without labeled pairs, which the train stage applies itself
(tasks/train/stage.py `prepare_training`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from tasks.core.config import DEFAULT_SEED, ConfigError, Settings
from tasks.core.defaults import DEFAULT_ENCODER, DEFAULT_TEACHER
from tasks.core.device import DEVICE_DESCRIPTION, DeviceSetting
from tasks.train.hard_negatives import MiningSettings
from tasks.train.label_sources import LabelSource
from tasks.train.learning_rate import LR_DESCRIPTION, SMALL_DATA_LR, LearningRate

# The recipe: InfoNCE + HT on the triples, CoSENT on stage 3's `label`, the backbone anchor at 50, lr `auto`. Above
# the triples alone on STS-B dev at the main job's size (27 anchors) and at 405, and the only one of triples / pairs /
# both above the backbone on SICK trial there; above the backbone on both at 80, 150 and 156 (docs/results.md "Data
# value"). LossSettings' own defaults are the triples alone (the benchmarks' building block); TrainSettings.losses
# starts from the recipe's weights.
RECIPE_LOSSES = {"regression": 1.0, "regression_loss": "cosent", "backbone_anchor": 50.0}
# Data without labeled pairs: the regression has nothing to train on, so each of these left at the recipe's value
# takes the measured triples-only recipe's (InfoNCE + HT, lr 3e-5: docs/results.md's 27- and 405-anchor rows).
WITHOUT_PAIRS_LOSSES = {"regression": 0.0, "regression_loss": "cosine", "backbone_anchor": 0.0}
WITHOUT_PAIRS_LR = SMALL_DATA_LR


class BackboneSettings(Settings):
    """The model trained: a sentence encoder with mean pooling or a BeLLM-style decoder, and which weights train."""

    kind: Literal["encoder", "bellm"] = Field("encoder", description="'encoder' (mean pooling; small and fast on a "
                                              "CPU) or 'bellm' (a decoder LM, last-token pooling).")
    source: str | None = Field(None, description=f"Registered name (encoder: {DEFAULT_ENCODER}, or the larger "
                               f"{DEFAULT_TEACHER} after `./stsgen teacher fetch`) or local path; None: the kind's "
                               "default model.")
    bidirectional_layers: int = Field(1, ge=0, description="BeLLM: last n layers attend bidirectionally (0 = causal).")
    train_layers: int | None = Field(None, ge=1, description="Train only the top k layers (None = all weights).")
    lora_rank: int | None = Field(None, ge=1, description="Train rank-r LoRA adapters only (None = no LoRA).")
    lora_alpha: float = Field(16.0, gt=0, description="LoRA scale: the adapters' update is multiplied by "
                              "alpha / rank.")
    lora_targets: tuple[str, ...] = Field(("query", "value", "q_proj", "v_proj"),
                                          description="Names of the linear layers that get adapters (an encoder's "
                                          "and a decoder's attention projections).")
    max_length: int = Field(96, ge=8, description="Tokens kept per sentence: longer than nearly every STS sentence.")

    @model_validator(mode="after")
    def _one_way_to_freeze(self) -> "BackboneSettings":
        if self.lora_rank is not None and self.train_layers is not None:
            raise ValueError("set either train_layers or lora_rank, not both (LoRA freezes every base weight)")
        return self


class LossSettings(Settings):
    """The training objective: a weighted sum of InfoNCE, the hierarchical triplet loss, a regression onto stage-3
    labels and the backbone anchor. Its own defaults are the triples alone; TrainSettings' are the recipe
    (`RECIPE_LOSSES`)."""

    infonce: float = Field(1.0, ge=0, description="Weight of InfoNCE on (anchor, positive) with s⁻ as hard "
                           "negative.")
    hierarchical_triplet: float = Field(1.0, ge=0, description="β: weight of the HT loss (NGCSE, eq. 7).")
    regression: float = Field(0.0, ge=0, description="Weight of the regression onto stage-3 labels (Sun et al. "
                              "2022); 0: the triples alone.")
    regression_loss: Literal["cosine", "cosent"] = Field(
        "cosine", description="cosine: CosineSimilarityLoss, L2 between cosine and label (Sun et al. 2022); cosent: "
        "CoSENTLoss, only the labels' order counts.")
    backbone_anchor: float = Field(0.0, ge=0, description="Weight of 1 − cos(student, frozen backbone) per training "
                                   "sentence: keeps the backbone's space, so other domains lose less.")
    infonce_mini_batch: int | None = Field(None, ge=1, description="Use CachedMultipleNegativesRankingLoss with "
                                           "this mini-batch: large InfoNCE batches in bounded memory.")
    temperature: float = Field(0.05, gt=0, description="InfoNCE's temperature (SimCSE's 0.05).")
    m1: float = Field(5e-3, ge=0, description="HT margin between s⁺ and sᵐ (NGCSE's).")
    m2: float = Field(1e-2, ge=0, description="HT margin between sᵐ and s⁻ (NGCSE's).")
    negatives: Literal["generated", "mined", "both"] = Field(
        "generated", description="InfoNCE's hard negatives: the LLM's s⁻, negatives mined from the corpus "
        "(mining.num_negatives > 0), or both.")
    simcse: bool = Field(False, description="Unsupervised SimCSE baseline: each anchor against itself under "
                         "another dropout mask (ignores the other weights).")

    def key_exclusions(self) -> frozenset[str]:
        """`backbone_anchor` enters the key only when it is on: a training from before it keeps its key."""
        return self.NOT_IN_KEY | (frozenset() if self.backbone_anchor else frozenset({"backbone_anchor"}))

    @model_validator(mode="after")
    def _anchor_needs_a_task_loss(self) -> "LossSettings":
        if self.backbone_anchor and self.simcse:
            raise ValueError("losses.backbone_anchor is not applied to the SimCSE baseline (its dropout views are the "
                             "comparison's point): set backbone_anchor to 0 with simcse")
        if self.backbone_anchor and self.infonce_mini_batch:
            raise ValueError("losses.backbone_anchor embeds the whole batch at once, which would undo "
                             "infonce_mini_batch's memory bound: set one of them")
        return self


class TrainSettings(Settings):
    # Where it trains, not what (tasks.core.stage); the evaluation sets enter the stage key as their content;
    # wise_alpha is applied after training, so it keys the stage's outputs (TrainJob.key), not its checkpoints.
    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"device", "eval_sets", "wise_alpha"})

    def key_exclusions(self) -> frozenset[str]:
        """`precision` enters the key only as bfloat16 (resolved before the key): a float32 training from before the
        field keeps its key."""
        return self.NOT_IN_KEY | (frozenset({"precision"}) if self.precision == "float32" else frozenset())

    backbone: BackboneSettings = Field(BackboneSettings(), description="The model trained.")
    losses: LossSettings = Field(LossSettings(**RECIPE_LOSSES), description="The objective's weights and forms: "
                                 "the recipe (triples + CoSENT on stage 3's label + the backbone anchor); a partial "
                                 "mapping keeps the recipe's other weights.")
    mining: MiningSettings = Field(MiningSettings(), description="Hard negatives mined from the corpus.")
    steps: int = Field(200, ge=1, description="Optimizer steps: a few epochs of a main job's data, minutes on 2 CPU "
                       "cores.")
    batch_size: int = Field(16, ge=2, description="Triples per step (InfoNCE's in-batch negatives come from them).")
    lr: LearningRate = Field("auto", description=LR_DESCRIPTION)
    warmup_steps: int = Field(10, ge=0, description="Linear warm-up steps: the first updates of a pretrained model "
                              "stay small.")
    eval_every: int = Field(50, ge=1, description="Steps between STS-B dev evaluations (the best-on-dev weights are "
                            "kept).")
    heldout_fraction: float = Field(0.1, ge=0, lt=0.5, description="Share of the triples held out for the "
                                    "alignment / uniformity diagnostics (RFD).")
    dev_pairs: int | None = Field(None, ge=10, description="STS-B dev pairs used during training (None = all).")
    encode_batch: int = Field(64, ge=1, description="Encoding batch on the CPU (×8 on a GPU).")
    seed: int = Field(DEFAULT_SEED, description="Seed of the split, the batches and initialisation.")
    device: DeviceSetting = Field("auto", description=DEVICE_DESCRIPTION)
    precision: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="Forward passes: 'auto' = bf16 autocast where native (GPU, AVX-512-BF16 or AMX CPU: "
        "faster), float32 elsewhere; weights and optimizer stay float32.")
    label_source: LabelSource = Field("label", description="The regression's target (with losses.regression > 0): "
                                      "stage 3's label, its rating or context_label alone, or a teacher's cosine.")
    teacher: str = Field(DEFAULT_TEACHER, description="label_source=teacher: the registered teacher (`./stsgen "
                         "teacher fetch`) or a sentence-transformers folder.")
    wise_alpha: float = Field(1.0, gt=0, le=1, description="WiSE-FT: ship (1 − α)·backbone + α·trained weights; 1: "
                              "plain fine-tuning, lower keeps more of the backbone on other domains.")
    eval_sets: list[str] = Field([], description="Sets reported at the end beside STS-B dev, never chosen on "
                                 "('stsb-test', STS12–16 folders, SICK files); none by default: report test once. "
                                 "With mining, no mined negative is one of their sentences (nor STS-B dev's or "
                                 "test's).")

    @field_validator("losses", mode="before")
    @classmethod
    def _partial_losses_keep_the_recipe(cls, value: object) -> object:
        """A mapping (a flag, a deployment's `-p train='{"losses": {…}}'`) is filled in from the recipe; a
        LossSettings object is taken as it is. The recipe's anchor is left out beside SimCSE or the cached InfoNCE,
        which LossSettings refuses it with."""
        if not isinstance(value, Mapping):
            return value
        recipe = dict(RECIPE_LOSSES)
        if value.get("simcse") or value.get("infonce_mini_batch"):
            del recipe["backbone_anchor"]
        return recipe | dict(value)

    @field_validator("lr")
    @classmethod
    def _positive_lr(cls, value: LearningRate) -> LearningRate:
        if value != "auto" and not value > 0:
            raise ValueError(f"lr must be a positive number or 'auto', got {value!r}")
        return value

    @model_validator(mode="after")
    def _label_source_needs_regression(self) -> "TrainSettings":
        if self.label_source != "label" and not self.losses.regression:
            raise ValueError(f"label_source={self.label_source!r} chooses the regression's target, but "
                             "losses.regression is 0: set losses.regression > 0 (e.g. 1.0), or leave label_source "
                             "at 'label'")
        return self

    @model_validator(mode="after")
    def _wise_needs_full_weights(self) -> "TrainSettings":
        if self.wise_alpha < 1.0 and self.backbone.lora_rank is not None:
            raise ValueError(f"wise_alpha={self.wise_alpha} interpolates full weights, but backbone.lora_rank="
                             f"{self.backbone.lora_rank} trains low-rank adapters B·A, and mixing A and B separately "
                             "does not scale their product: set wise_alpha to 1.0 with LoRA (a smaller lora_alpha "
                             "scales the adapters' update instead)")
        return self

    @model_validator(mode="after")
    def _mined_negatives_need_mining(self) -> "TrainSettings":
        if (self.losses.negatives != "generated") != bool(self.mining.num_negatives):
            raise ValueError(f"losses.negatives={self.losses.negatives!r} with mining.num_negatives="
                             f"{self.mining.num_negatives}: mined negatives are used only with negatives 'mined' or "
                             "'both', and those need mining.num_negatives > 0")
        return self


def for_data(settings: TrainSettings, has_pairs: bool, source: str = "the data") -> TrainSettings:
    """`settings` for data with (`has_pairs`) or without labeled pairs: the one rule, applied by the train stage
    whichever entry point started it. Without pairs, each field of `WITHOUT_PAIRS_LOSSES` and the lr left at the
    recipe's value takes the triples-only recipe's — compared with the defaults, not with the fields a caller named,
    because a UI form sends every default — so a regression weight other than the recipe's stays, and the stage
    refuses it (fail fast). A regression target other than stage 3's `label` (`label_source`) names pairs that are
    not there: ConfigError naming `source`."""
    if has_pairs:
        return settings
    if settings.label_source != "label":
        raise ConfigError(f"{source}: train.label_source={settings.label_source!r} chooses the target of the pairs' "
                          "regression, but there are no labeled pairs (its runs did not run label-pairs, or none of "
                          "their pairs survived): run sts-pipeline or label-pairs on them, or leave label_source "
                          "at 'label'.")
    recipe = TrainSettings()
    losses = {name: value for name, value in WITHOUT_PAIRS_LOSSES.items()
              if getattr(settings.losses, name) == getattr(recipe.losses, name)}
    lr = {"lr": WITHOUT_PAIRS_LR} if settings.lr == recipe.lr else {}
    if not losses and not lr:
        return settings
    return settings.model_copy(update={"losses": settings.losses.model_copy(update=losses), **lr})
