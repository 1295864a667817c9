"""Training losses for the surrogate sentence encoder, one per module (inputs documented in each). InfoNCE and the
regression onto stage-3 labels are sentence-transformers' own (`MultipleNegativesRankingLoss` and its Cached variant,
`CosineSimilarityLoss`, `CoSENTLoss`); these are what it lacks:

- `HierarchicalTripletLoss` — s⁺ > sᵐ > s⁻ with margins m1, m2 (NGCSE, eq. 6), logging its two parts
- `WeightedSumLoss` — several losses on one batch's columns, embedded once, each with its weight (NGCSE, eq. 7)
- `BackboneAnchorLoss` — every sentence's embedding kept near the frozen backbone's (learning without forgetting)
"""

from models.losses.backbone_anchor import BackboneAnchorLoss
from models.losses.hierarchical_triplet import HierarchicalTripletLoss, hierarchical_triplet_parts
from models.losses.weighted_sum import WeightedSumLoss

__all__ = ["BackboneAnchorLoss", "HierarchicalTripletLoss", "WeightedSumLoss", "hierarchical_triplet_parts"]
