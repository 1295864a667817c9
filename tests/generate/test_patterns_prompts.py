"""Pattern sources (SemEval TSV, STS-B CSV, SICK), seeded example sampling, and the prompt templates."""

from __future__ import annotations

import pytest

from tasks.core.config import ConfigError
from tasks.generate.patterns import in_band, load_pattern_source, sample_examples
from tasks.generate.settings import PatternSettings
from tasks.llm.prompting import KINDS_BY_PATTERN, load_template
from tests.conftest import shared


def test_default_sts_source_is_stsb_2012train_only():
    source = load_pattern_source(PatternSettings())
    assert 900 < len(source.pairs) <= 1004  # 1004 rows of year 2012train, a few unparseable
    assert all(p.example_id.startswith("sts-train.csv:") for p in source.pairs)
    examples = sample_examples(source, KINDS_BY_PATTERN["sts"], 3, seed=13)
    assert all(p.score > 4 for p in examples["positive"])
    assert all(1 <= p.score <= 4 for p in examples["intermediate"])
    assert all(p.score < 1 for p in examples["negative"])


def test_sampling_is_seeded_and_per_kind():
    source = load_pattern_source(PatternSettings())
    a = sample_examples(source, ("positive", "negative"), 3, seed=1)
    b = sample_examples(source, ("positive", "intermediate", "negative"), 3, seed=1)
    c = sample_examples(source, ("positive",), 3, seed=2)
    assert a["positive"] == b["positive"] and a["negative"] == b["negative"]
    assert c["positive"] != a["positive"]


def test_deletion_shaped_intermediate_examples(tmp_path):
    """`intermediate_examples="deletion"`: only 1–4 pairs whose shorter sentence deletes words from the longer, shown
    longer → shorter (a pair given shorter-first is turned round); a substitution never shown; too few: one error
    naming the shape and the fix. The other kinds' examples do not move."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("3.2\tA man is playing a guitar and singing.\tA man is playing a guitar.\n"
                     "3.5\tA man is riding a motorcycle.\tA man is riding a motorcycle on the highway.\n"
                     "4.0\tTwo men are fighting in a cow pasture.\tTwo men are fighting in a cattle pen.\n"
                     "2.0\tA woman is cutting an onion.\tA woman is cutting meat.\n"
                     "4.8\tA man eats.\tA man is eating.\n0.2\tA cat.\tThe stock fell.\n")
    source = load_pattern_source(PatternSettings(source=str(pairs)))
    shaped = sample_examples(source, ("intermediate",), 2, seed=0, intermediate_examples="deletion")
    assert [(p.sentence1, p.sentence2) for p in shaped["intermediate"]] == [
        ("A man is playing a guitar and singing.", "A man is playing a guitar."),
        ("A man is riding a motorcycle on the highway.", "A man is riding a motorcycle.")]
    with pytest.raises(ConfigError, match=r"2 deletion-shaped pairs in the 'intermediate' band, 3 needed.*"
                                          r"intermediate_examples to 'band'"):
        sample_examples(source, ("intermediate",), 3, seed=0, intermediate_examples="deletion")
    assert len(sample_examples(source, ("intermediate",), 3, seed=0)["intermediate"]) == 3  # 'band': any 1–4 pair
    default = load_pattern_source(PatternSettings())
    band = sample_examples(default, KINDS_BY_PATTERN["sts"], 3, seed=13)
    deletion = sample_examples(default, KINDS_BY_PATTERN["sts"], 3, seed=13, intermediate_examples="deletion")
    assert band["negative"] == deletion["negative"] and band["positive"] == deletion["positive"]
    assert all(1 <= p.score <= 4 and len(p.sentence2) < len(p.sentence1) for p in deletion["intermediate"])


def test_semeval_train_folder(tmp_path):
    folder = shared("sts12-train")
    source = load_pattern_source(PatternSettings(source=str(folder)))
    assert len(source.pairs) == 750 + 734 and not source.bad_rows


def test_sick_nli_source():
    source = load_pattern_source(PatternSettings(kind="nli", source=str(shared("sick2014/SICK_train.txt"))))
    examples = sample_examples(source, KINDS_BY_PATTERN["nli"], 3, seed=13)
    assert all(p.label == "ENTAILMENT" for p in examples["positive"])
    assert all(p.label == "CONTRADICTION" for p in examples["negative"])


def test_malformed_sts_file_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("high\tA man.\tA woman.\nonly one field\n")
    with pytest.raises(ConfigError, match=r"bad.tsv.*bad.tsv:1: score 'high' is not a number"):
        load_pattern_source(PatternSettings(source=str(bad)))


def test_missing_pattern_file_and_small_band(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_pattern_source(PatternSettings(source=str(tmp_path / "nope.tsv")))
    few = tmp_path / "few.tsv"
    few.write_text("4.8\tA man eats.\tA man is eating.\n0.2\tA cat.\tThe stock fell.\n")
    source = load_pattern_source(PatternSettings(source=str(few)))
    with pytest.raises(ConfigError, match="1 pairs in the 'positive' band, 3 needed"):
        sample_examples(source, ("positive",), 3, seed=0)


def test_sick_without_header_is_rejected(tmp_path):
    bad = tmp_path / "sick.txt"
    bad.write_text("1\tA\tB\t3.0\tNEUTRAL\n")
    with pytest.raises(ConfigError, match="header lacks sentence_A"):
        load_pattern_source(PatternSettings(kind="nli", source=str(bad)))


@pytest.mark.parametrize("pattern", ["sts", "nli"])
def test_templates_render_verbatim_instructions_with_examples(pattern):
    source_pairs = [dict(sentence1=f"first {i}", sentence2=f"second {i}") for i in range(3)]
    for kind in KINDS_BY_PATTERN[pattern]:
        template = load_template(pattern, kind)
        system = template.system_message(source_pairs)
        label = "Premise" if pattern == "nli" else "Sentence 1"
        assert system.count(f"- {label}: first") == 3 and "- Example 3:" in system
        assert "directly without any other interpretation" in system
        version = "v3" if (pattern, kind) == ("sts", "negative") else "v1"  # the STS negative's current template
        assert len(template.sha256) == 64 and template.name == f"{pattern}-{kind}.{version}"
        messages = template.messages(system, "The anchor.")
        assert messages[-1] == {"role": "user", "content": "The anchor."}


def test_in_band_edges():
    from tasks.generate.patterns import PatternPair

    assert in_band(PatternPair("x", "a", "b", score=4.0), "sts", "intermediate")
    assert not in_band(PatternPair("x", "a", "b", score=4.0), "sts", "positive")
    assert in_band(PatternPair("x", "a", "b", score=0.8), "sts", "negative")
