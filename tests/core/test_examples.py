"""The example inputs in data/examples/ (data/README.md): each is read by the project's own reader and yields the
rows it was written with, and each is large enough for the commands the README runs on it."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.core.config import CorpusSettings
from tasks.core.sts_data import read_sts_source
from tasks.corpus.sentences import load_corpus
from tasks.generate.anchors import AnchorSettings, sample_anchors
from tasks.generate.patterns import load_pattern_source, sample_examples
from tasks.generate.settings import PatternSettings
from tasks.label.pair_units import read_pairs

DATA = Path(__file__).resolve().parents[2] / "data"
EXAMPLES = DATA / "examples"


@pytest.fixture(autouse=True)
def _fresh_home(tmp_path, monkeypatch):
    monkeypatch.setenv("STSGEN_HOME", str(tmp_path / "home"))  # load_corpus caches sentence tables there


# source → (documents, sentences, first doc_id, first sentence)
CORPORA = {
    "docs": (3, 12, "harbor.txt",
             "The fishing boats returned to the harbor just before the storm reached the coast."),
    "corpus.cor": (4, 12, "corpus.cor#0",
                   "The bakery on the corner opens before sunrise every day except Sunday."),
    "corpus.jsonl": (3, 9, "corpus.jsonl#market",
                     "The weekly market fills the main square every Saturday morning."),
    "corpus.parquet": (3, 9, "corpus.parquet#garden",
                       "Residents turned an empty parking lot into a community garden."),
}


@pytest.mark.parametrize("name", list(CORPORA))
def test_corpus_examples(name):
    documents, sentences, first_doc, first_sentence = CORPORA[name]
    corpus = load_corpus(CorpusSettings(source=str(EXAMPLES / name)))
    assert corpus.stats["documents"] == documents and corpus.stats["sentences"] == sentences
    assert corpus.stats["usable"] == sentences and corpus.rejected == []  # every sentence passes the filters
    first = corpus.sentences.iloc[0]
    assert (first["doc_id"], first["position"], first["text"]) == (first_doc, 0, first_sentence)
    sample, counts = sample_anchors(corpus, 5, 13, AnchorSettings())  # the README's `generate --n 5` on this corpus
    duplicates = counts["duplicate_texts"]
    assert len(sample) == 5 and duplicates == 0


def test_parquet_examples_are_the_scripts_output():
    spec = importlib.util.spec_from_file_location("make_parquet", EXAMPLES / "make_parquet.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for name, table in script.tables().items():
        assert pq.read_table(EXAMPLES / name).equals(table), f"{name} is stale: run data/examples/make_parquet.py"


def test_pairs_example():
    pairs, bad = read_pairs(EXAMPLES / "pairs.parquet")
    assert bad == [] and len(pairs) == 6
    assert list(pairs["gold"]) == [4.6, 4.2, 3.4, 2.2, 1.0, 0.0]
    assert set(pairs["relation"]) == {"pair"}
    assert pairs.iloc[0][["s1", "s2"]].tolist() == ["A man is slicing bread in the kitchen.",
                                                    "Someone is cutting a loaf of bread."]


def test_sts_b_layout_example():
    frame = read_sts_source(str(EXAMPLES / "sts-b.tsv"))  # what `--eval-set data/examples/sts-b.tsv` reads
    assert len(frame) == 10 and set(frame["subset"]) == {"sts-b"}
    assert frame.iloc[0][["s1", "s2", "gold"]].tolist() == ["A cat is sitting on the windowsill.",
                                                            "A cat sits on a window ledge.", 4.8]
    assert frame["gold"].between(0, 5).all()


def test_semeval_folder_example():
    frame = read_sts_source(str(EXAMPLES / "sts-semeval"))
    assert frame.groupby("subset").size().to_dict() == {"captions": 4, "news": 3}  # news' unscored pair is skipped
    assert frame.iloc[-1][["s1", "gold"]].tolist() == ["The museum will close for repairs in March.", 0.4]


def test_sick_example():
    frame = read_sts_source(str(EXAMPLES / "sick.txt"))
    assert len(frame) == 9 and set(frame["subset"]) == {"sick"}
    assert frame.iloc[0][["s1", "s2", "gold"]].tolist() == ["A man is playing a flute on the street.",
                                                            "A man is playing an instrument.", 4.3]


def test_examples_as_pattern_sources():
    """sts-b.tsv (year 2012train) is an STS pattern source and sick.txt an NLI one, with the 3 examples per band a
    prompt needs."""
    settings = PatternSettings(kind="sts", source=str(EXAMPLES / "sts-b.tsv"))
    sts = load_pattern_source(settings)
    assert len(sts.pairs) == 10 and sts.bad_rows == []
    # As stage 1 samples them by default: intermediates only from the band's deletion-shaped pairs.
    chosen = sample_examples(sts, ("positive", "intermediate", "negative"), 3, seed=13,
                             intermediate_examples=settings.intermediate_examples)
    assert settings.intermediate_examples == "deletion"
    assert {k: len(v) for k, v in chosen.items()} == {"positive": 3, "intermediate": 3, "negative": 3}
    assert all(len(p.sentence2.split()) < len(p.sentence1.split()) for p in chosen["intermediate"])
    nli = load_pattern_source(PatternSettings(kind="nli", source=str(EXAMPLES / "sick.txt")))
    assert [p.label for p in nli.pairs].count("CONTRADICTION") == 3 and nli.bad_rows == []
    assert {k: len(v) for k, v in sample_examples(nli, ("positive", "negative"), 3, seed=13).items()} == \
        {"positive": 3, "negative": 3}


def test_readme_commands_on_the_examples_parse():
    """The README's "Try it on the example inputs" commands: each parses with the CLI's own parser and every
    data/examples path it names exists."""
    from flows.cli import build_parser

    readme = (DATA.parent / "README.md").read_text()
    block = readme.split("### Try it on the example inputs", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [ln.split("#", 1)[0].rstrip() for ln in block.replace("\\\n", " ").splitlines()]
    commands = [shlex.split(ln.replace("$out", "data/outputs/examples")) for ln in lines if ln.startswith("./stsgen")]
    assert [c[1] for c in commands] == ["generate", "generate", "generate", "retrieve", "label", "eval"]
    parser = build_parser()
    for command in commands:
        parser.parse_args(command[1:])
        paths = [a for a in command if a.startswith("data/examples/")]
        assert paths and all((DATA.parent / p).exists() for p in paths), command


def test_examples_are_small_and_documented():
    files = sorted(p for p in EXAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert sum(p.stat().st_size for p in files) < 50_000
    readme = (DATA / "README.md").read_text()
    undocumented = [str(p.relative_to(EXAMPLES)) for p in files
                    if p.name not in readme and f"{p.parent.name}/" not in readme]
    assert undocumented == []
