"""Render the versioned templates in prompts/ into chat messages.

A prompt kind is (pattern, kind), e.g. ("sts", "intermediate"); the system message holds the instruction and the
run's fixed examples, the user message is the base sentence. Each template is identified by name, version and the
sha256 of its file, all recorded in outputs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

import jinja2

from tasks.core.config import ConfigError

KINDS_BY_PATTERN: dict[str, tuple[str, ...]] = {
    "sts": ("positive", "intermediate", "negative"),
    "nli": ("positive", "negative"),
}
# What each generation is derived from, as in NGCSE: s+ from the anchor, s- (and s^m) from s+.
SEED_BASES: dict[str, str] = {"positive": "anchor", "intermediate": "positive", "negative": "positive"}


def generation_bases(kinds: tuple[str, ...], intermediate_base: str = "positive") -> dict[str, str]:
    """What each kind is derived from: the seed's bases, with the intermediate's base `intermediate_base`
    ('anchor': the anchor with details left out, so s^m does not inherit s+'s errors; issue 34)."""
    return {k: intermediate_base if k == "intermediate" else SEED_BASES[k] for k in kinds}
DEFAULT_VERSION = "v1"
# Kinds whose current template is newer: the STS negative asks for a sentence that has nothing to do with the input,
# as the STS pattern's low-score pairs are (v1 asked for a contradiction and got minimal edits, issue 24; v2 for
# "something different" and stayed on topic: mean cosine to the anchor 0.53 against STS-B's 0.20, issue 34 —
# docs/results.md).
CURRENT_VERSION: dict[tuple[str, str], str] = {("sts", "negative"): "v3"}

_env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)


@dataclass(frozen=True)
class PromptTemplate:
    pattern: str
    kind: str
    version: str
    source: str

    @property
    def name(self) -> str:
        return f"{self.pattern}-{self.kind}.{self.version}"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def system_message(self, examples: list[dict[str, str]]) -> str:
        return self.render(examples=examples)

    def render(self, **values: object) -> str:
        return _env.from_string(self.source).render(**values).strip()

    def messages(self, system: str, base_text: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": system}, {"role": "user", "content": base_text}]


def load_template(pattern: str, kind: str, version: str | None = None) -> PromptTemplate:
    version = version or CURRENT_VERSION.get((pattern, kind), DEFAULT_VERSION)
    name = f"{pattern}-{kind}.{version}.j2"
    try:
        source = resources.files("prompts").joinpath("templates", name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"No prompt template prompts/templates/{name}; pattern must be sts or nli.") from None
    return PromptTemplate(pattern, kind, version, source)
