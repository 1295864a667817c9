"""Cost accounting: the tokens a stage's answers took (cached ones included) and this run's own, priced with the
user's prices, in the manifest and the quality table — against the scripted server's reported usage."""

from __future__ import annotations

import json

import pytest

from flows.generate_sts_triples import generate_sts_triples
from tasks.core.config import LLMSettings
from tasks.generate.settings import SamplingSettings, VerifierSettings
from tasks.report.run_quality import quality_rows
from tests.conftest import generate_settings


def generate(corpus, n: int, **kw) -> dict[str, str]:
    settings = generate_settings(corpus, n=n, sampling=SamplingSettings(candidates=1),
                                 verifier=VerifierSettings(judge=False))
    return generate_sts_triples(settings=settings, **kw)


def test_tokens_and_money_per_triple_in_the_manifest(prefect_harness, scripted, tiny_corpus, tmp_path):
    llm = LLMSettings(base_url=scripted.base_url, model="scripted-model", cache_path=str(tmp_path / "llm.sqlite"),
                      price_prompt_per_million=2.0, price_completion_per_million=10.0)
    first = json.loads(open(generate(tiny_corpus, n=4, llm=llm,
                                     output_dir=str(tmp_path / "a"))["manifest"]).read())
    # What the server billed: its usage for each request it answered (its responder is deterministic).
    usage = [scripted.completion(r["body"])[1]["usage"] for r in scripted.chat_requests()]
    prompt, completion = sum(u["prompt_tokens"] for u in usage), sum(u["completion_tokens"] for u in usage)
    cost = first["cost"]
    assert (cost["prompt_tokens"], cost["completion_tokens"]) == (prompt, completion) and prompt and completion
    assert (cost["sent_prompt_tokens"], cost["sent_completion_tokens"]) == (prompt, completion)
    assert cost["units"] == first["counts"]["triples"] == 4 and cost["unit"] == "triple"
    assert cost["money"] == pytest.approx((2.0 * prompt + 10.0 * completion) / 1e6)
    assert cost["money_per_unit"] == pytest.approx(cost["money"] / 4)
    assert cost["tokens_per_unit"] == pytest.approx((prompt + completion) / 4, abs=0.1)
    # The same run again elsewhere, answered from the response cache: the data cost the same, this run nothing.
    again = json.loads(open(generate(tiny_corpus, n=4, llm=llm,
                                     output_dir=str(tmp_path / "b"))["manifest"]).read())["cost"]
    assert len(scripted.chat_requests()) == len(usage)
    assert (again["prompt_tokens"], again["money"]) == (prompt, cost["money"])
    assert (again["sent_prompt_tokens"], again["sent_completion_tokens"], again["money_sent"]) == (0, 0, 0.0)
    row = next(r for r in quality_rows({"generate-sts-triples": first}) if r["measure"].startswith("LLM tokens"))
    assert f"{prompt:,} prompt" in row["value"] and f"{cost['money']:.4f}" in row["value"]
    # No prices given: tokens still counted, no money invented.
    unpriced = llm.model_copy(update={"price_prompt_per_million": None, "price_completion_per_million": None})
    plain = json.loads(open(generate(tiny_corpus, n=4, llm=unpriced,
                                     output_dir=str(tmp_path / "c"))["manifest"]).read())["cost"]
    assert plain["prompt_tokens"] == prompt and plain["money"] is None and plain["money_sent"] is None
