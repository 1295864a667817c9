"""The data report before training: the pattern report (generated vs human pairs) and the run's quality table.
Model evaluation (STS benchmarks of an encoder) is stage 4's: tasks/train and tasks/core/sts_evaluation.py."""
