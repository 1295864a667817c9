"""Stage 2's settings (retrieve-contexts), owned by the stage: the one object its flow takes. The parts live beside the
code they drive (screening and selection in retrieval.py, the coherence model in coherence.py, written contexts in
generated_contexts.py); this module puts them together with the corpus and the shard runner."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from tasks.core.config import CorpusSettings, Settings
from tasks.core.runners import ExecutionSettings
from tasks.retrieve.coherence import CoherenceSettings
from tasks.retrieve.generated_contexts import ContextSourceSettings
from tasks.retrieve.retrieval import SelectionSettings


class RetrieveSettings(Settings):
    """Where contexts come from and how they are chosen. The cache key is built from the corpus content, the
    coherence model's key and these fields (tasks/retrieve/stage.py)."""

    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"shard_size", "execution"})

    corpora: list[CorpusSettings] | None = Field(
        None, description="Corpora the contexts come from; None: the default corpus (in sts-pipeline: stage 1's).")
    window_k: int = Field(1, ge=1, description="Sentences on each side of a context window (c<, c>).")
    chunk_size: int = Field(0, ge=0, description="Split documents into chunks of this many sentences (0: whole).")
    selection: SelectionSettings = SelectionSettings()
    coherence: CoherenceSettings = CoherenceSettings()
    source: ContextSourceSettings = ContextSourceSettings()
    shard_size: int = Field(256, ge=1, description="Query sentences per shard (a shard is the unit of resumption).")
    execution: ExecutionSettings = ExecutionSettings()

    def corpora_or(self, default: CorpusSettings) -> list[CorpusSettings]:
        """The corpora to read: the ones given, else `default` (the default corpus, or the pipeline's stage 1's)."""
        return list(self.corpora) if self.corpora else [default]
