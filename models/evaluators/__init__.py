"""Custom sentence-transformers evaluators, one per module (inputs documented in each):

- `AlignmentUniformityEvaluator` — alignment and uniformity on held-out training pairs and on dev positives, the
  measurements behind RFD (NGCSE, eq. 2–5)
"""

from models.evaluators.alignment_uniformity import AlignmentUniformityEvaluator

__all__ = ["AlignmentUniformityEvaluator"]
