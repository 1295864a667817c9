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


def test_the_judges_tokens_and_every_best_of_n_choice_are_counted(prefect_harness, scripted, tiny_corpus, tmp_path):
    """With the judge on and three choices per request, the manifest's tokens are what the server billed for every
    request: the generations' n choices (completion tokens of all three, the kept one or not) and the judge's calls."""
    llm = LLMSettings(base_url=scripted.base_url, model="scripted-model", cache_path=str(tmp_path / "llm.sqlite"),
                      price_prompt_per_million=2.0, price_completion_per_million=10.0)
    settings = generate_settings(tiny_corpus, n=3, sampling=SamplingSettings(candidates=3))
    manifest = json.loads(open(generate_sts_triples(settings=settings, llm=llm, output_dir=str(tmp_path / "a"))[
        "manifest"]).read())
    bodies = [r["body"] for r in scripted.chat_requests()]
    judged = [b for b in bodies if b["messages"][-1]["content"].rstrip().endswith("Answer yes or no.")]
    generated = [b for b in bodies if b not in judged]
    assert judged and generated and all(b.get("n") == 3 for b in generated)
    usage = [scripted.completion(b)[1]["usage"] for b in bodies]
    prompt, completion = sum(u["prompt_tokens"] for u in usage), sum(u["completion_tokens"] for u in usage)
    choices_only = sum(scripted.completion(b)[1]["usage"]["completion_tokens"] for b in generated)
    one_choice = sum(scripted.completion({**b, "n": 1})[1]["usage"]["completion_tokens"] for b in generated)
    assert choices_only > one_choice  # the three choices cost more than the kept one alone
    cost = manifest["cost"]
    assert (cost["prompt_tokens"], cost["completion_tokens"]) == (prompt, completion)
    assert cost["money"] == pytest.approx((2.0 * prompt + 10.0 * completion) / 1e6)
