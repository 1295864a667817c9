"""Stage 1, generate-sts-triples: few-shot patterns, the LLM generation chains, rule validation, the LLM judge."""
