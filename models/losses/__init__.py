"""Training losses for the surrogate sentence encoder, one per module (inputs documented in each):

- `CosineRegressionLoss` — L2 between predicted cosine and context labels (seed 003, §3.4)
- `InfoNCELoss` — contrastive, in-batch + hard negatives, temperature τ (seed 004, eq. 1)
- `HierarchicalTripletLoss` — s⁺ > sᵐ > s⁻ with margins m1, m2 (seed 004, eq. 6)
"""

from models.losses.cosine_regression import CosineRegressionLoss
from models.losses.hierarchical_triplet import HierarchicalTripletLoss
from models.losses.infonce import InfoNCELoss

__all__ = ["CosineRegressionLoss", "HierarchicalTripletLoss", "InfoNCELoss"]
