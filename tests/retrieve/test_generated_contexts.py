"""Stage 2's generated contexts (contexts.source = generated | both): the LLM writes (c<, c>) around each sentence
through the client (real HTTP against the scripted OpenAI-compatible server); garbled, copied and repeated answers
are quarantined with their reason; the rows keep the contexts.parquet schema; a re-run pays for nothing."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tasks.core.config import CorpusSettings, LLMSettings
from tasks.retrieve.generated_contexts import (
    ContextSourceSettings,
    check_context,
    context_requests,
    parse_context,
)
from tasks.retrieve.retrieval import CONTEXTS_SCHEMA, SelectionSettings
from tasks.retrieve.settings import RetrieveSettings
from tests.retrieve.test_retrieval import SMALL_MODEL

SETTINGS = ContextSourceSettings(source="generated", genres=["news report", "forum post"], draws_per_genre=2)


def test_answers_are_parsed_and_checked():
    assert parse_context("Before: The storm came.\nAfter: Roads closed.") == ("The storm came.", "Roads closed.")
    assert parse_context("**Before:** A b c.\n**after**: D e f.\nBefore: ignored") == ("A b c.", "D e f.")
    assert parse_context("Sure! Here it is: the storm came.") == (None, None)
    # The first label dropped (as the 1.5B model does most of the time): still two sides.
    assert parse_context("The storm came.\nAfter: Roads closed.") == ("The storm came.", "Roads closed.")
    assert parse_context("The storm came.\nRoads closed.") == ("The storm came.", "Roads closed.")
    assert parse_context("The storm came.\nRoads closed.\nThen more.") == (None, None)
    s = "Residents moved their cattle to the hills before the water arrived."
    assert check_context(s, None, "Roads were closed.", SETTINGS)[0] == "context_garbled"
    assert check_context(s, "Too short.", "Roads were closed for a week.", SETTINGS)[0] == "context_garbled"
    assert check_context(s, "A storm hit the coast.", "RESIDENTS moved their cattle to the hills before the water "
                         "arrived, officials said.", SETTINGS)[0] == "context_copied"
    assert check_context(s, "Residents moved cattle to hills before water arrived.", "Roads were closed for a week.",
                         SETTINGS)[0] == "context_copied"
    assert check_context(s, "A storm hit the coast on Monday.", "Roads were closed for a week.", SETTINGS) is None


def test_each_sentence_genre_and_draw_is_one_request_with_its_own_seed():
    requests = context_requests(["One sentence here.", "Another sentence here."], SETTINGS)
    assert len(requests) == 2 * 2 * 2
    assert len({r["params"]["seed"] for r in requests}) == 8
    assert "forum post" in requests[3]["messages"][0]["content"]
    assert requests[0]["messages"][1]["content"] == "One sentence here."


def writer(messages, body):
    """Answers by the sentence: a good context, a garbled one, a copy, and a repeat of an accepted c<."""
    sentence, seed = messages[-1]["content"], body.get("seed", 0)
    if "bridge" in sentence:
        return "I cannot help with that."
    if "symphony" in sentence:
        return f"Before: {sentence}\nAfter: The audience stood up and cheered."
    return f"Before: Officials gave an update on the situation today.\nAfter: Number {seed % 97} was reported later."


def test_generated_contexts_flow_quarantines_and_reuses(prefect_harness, tiny_corpus, tmp_path):
    from flows.retrieve_contexts import retrieve_contexts
    from tasks.llm.scripted_server import ScriptedOpenAI

    queries = tmp_path / "queries.txt"
    queries.write_text("The bridge over the river was inspected by engineers.\nThe symphony was praised by critics.\n"
                       "Farmers planted wheat earlier than usual this spring.\n")
    with ScriptedOpenAI(responder=writer) as server:
        llm = LLMSettings(base_url=server.base_url, model="scripted-model", cache_path=str(tmp_path / "cache.sqlite"))

        def run(source: str, out: str) -> dict:
            settings = RetrieveSettings(corpora=[CorpusSettings(source=str(tiny_corpus))], coherence=SMALL_MODEL,
                                        selection=SelectionSettings(screen_k=50, contexts_per_sentence=3),
                                        source=SETTINGS.model_copy(update={"source": source}))
            return retrieve_contexts(sentences=str(queries), settings=settings, llm=llm,
                                     output_dir=str(tmp_path / out))

        paths = run("generated", "gen")
        sent = len(server.chat_requests())
        assert sent == 3 * 2 * 2
        table = pq.read_table(paths["contexts"])
        assert table.schema.equals(CONTEXTS_SCHEMA)
        frame = table.to_pandas()
        # Wheat: 4 answers with the same c< → 1 accepted, 3 not diverse; the bridge's are garbled, the symphony's copies.
        assert frame["sentence"].unique().tolist() == ["Farmers planted wheat earlier than usual this spring."]
        assert len(frame) == 1 and (frame["context_id"] < 0).all() and (frame["doc_id"] == "generated").all()
        rejected = pq.read_table(paths["rejected"]).to_pandas()
        reasons = rejected.groupby("reason").size().to_dict()
        assert reasons == {"context_garbled": 4, "context_copied": 4, "context_not_diverse": 3, "no_context": 2}
        assert rejected["detail"].str.contains("genre").sum() == 11
        manifest = json.loads(open(paths["manifest"]).read())
        assert manifest["counts"]["generated_contexts"] == 1 and manifest["context_writer"]["model"] == "scripted-model"

        both = run("both", "both")  # every answer from the response cache: no request sent again
        assert len(server.chat_requests()) == sent
        mixed = pq.read_table(both["contexts"]).to_pandas()
        wheat = mixed[mixed["sentence"].str.startswith("Farmers")].sort_values("rank")
        assert (wheat["context_id"] >= 0).any() and (wheat["context_id"] < 0).sum() == 1
        assert wheat["rank"].tolist() == list(range(len(wheat)))


def test_a_down_writer_endpoint_fails_before_any_work(prefect_harness, tiny_corpus, tmp_path):
    from flows.retrieve_contexts import retrieve_contexts
    from tasks.core.config import ConfigError

    queries = tmp_path / "q.txt"
    queries.write_text("A sentence to place in a text.\n")
    with pytest.raises(ConfigError):
        retrieve_contexts(sentences=str(queries),
                          settings=RetrieveSettings(corpora=[CorpusSettings(source=str(tiny_corpus))],
                                                    coherence=SMALL_MODEL, source=SETTINGS),
                          output_dir=str(tmp_path / "out"),
                          llm=LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0))
    assert not (tmp_path / "out" / "retrieve-contexts").exists()
