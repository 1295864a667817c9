"""Stage 3, label-pairs: scoring units, context-vector labels, the LLM rating, label quality."""
