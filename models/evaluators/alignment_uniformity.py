"""Alignment and uniformity (Wang & Isola 2020) of a model's embeddings on two pair sets at every evaluation, so that
RFD (NGCSE: the mean over checkpoints of held-out-training minus evaluation alignment / uniformity) can be read
from the training log.

Inputs: `heldout` — (anchors, positives) of held-out training triples; `dev` — (sentence1, sentence2) of the dev
pairs whose gold marks them as positives (alignment), their sentences also measure uniformity. Either may be empty
(its two metrics are left out). Metrics: `align_heldout`, `uniform_heldout`, `align_dev`, `uniform_dev`; lower is
better for both kinds, so this evaluator has no primary metric and never drives model selection.
"""

from __future__ import annotations

import numpy as np
from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

from models.embedding_metrics import alignment, uniformity


class AlignmentUniformityEvaluator(BaseEvaluator):
    def __init__(self, heldout: tuple[list[str], list[str]], dev: tuple[list[str], list[str]],
                 batch_size: int = 64, name: str = ""):
        super().__init__()
        self.heldout, self.dev, self.batch_size, self.name = heldout, dev, batch_size, name
        self.greater_is_better = False

    def __call__(self, model, output_path: str | None = None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for split, (first, second) in (("heldout", self.heldout), ("dev", self.dev)):
            if len(first) < 2:
                continue
            e1, e2 = (np.asarray(model.encode(list(s), batch_size=self.batch_size, convert_to_numpy=True))
                      for s in (first, second))
            metrics[f"align_{split}"] = alignment(e1, e2)
            metrics[f"uniform_{split}"] = uniformity(np.concatenate([e1, e2]))
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics
