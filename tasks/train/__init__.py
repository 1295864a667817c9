"""Stage 4, train-surrogate: backbones, training data and losses on SentenceTransformerTrainer, mined negatives,
model selection and export, training curves."""
