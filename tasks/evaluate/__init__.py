"""Evaluation: STS benchmarks for an encoder, the pattern report (generated vs human pairs), the run's quality table."""
