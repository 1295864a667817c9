"""Versioned prompt templates (data only). Files: templates/<pattern>-<kind>.<version>.j2, rendered by
tasks/llm/prompting.py. The instruction texts are verbatim from NGCSE's appendix ("Details of the Prompt"); only the
three illustrative examples are filled in from the pattern source, sampled once per run."""
