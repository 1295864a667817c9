"""The benchmark corpus: gensim's default corpus plus the five corpora of ../shared/data/corpora (~207k sentences);
and SICK train's captions as a corpus (the genre lever's). Both read in place: they exist only on the project's
machines and never go into git."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tasks.core.config import CorpusSettings
from tasks.core.decontamination import EvalSentences, without_eval_sentences
from tasks.core.sts_data import read_sick

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora"
CORPORA = [
    CorpusSettings(),
    CorpusSettings(source=str(SHARED / "abc.zip"), document_split="blank_lines", sentence_per_line=True),
    CorpusSettings(source=str(SHARED / "brown.zip")),
    CorpusSettings(source=str(SHARED / "state_union.zip")),
    CorpusSettings(source=str(SHARED / "inaugural.zip")),
    CorpusSettings(source=str(SHARED / "movie_reviews.zip"), sentence_per_line=True),
]


def caption_corpus(sick_train: Path, evals: EvalSentences) -> tuple[pd.DataFrame, int]:
    """(SICK train's sentences as a corpus, one document each: `doc_id`, `text`; how many went as evaluation
    sentences): image and video captions, the genre of SICK trial and of STS-B's captions (MSRvid, images), for the
    genre lever (benchmarks/anchors_curve.sh genre). A sentence holding one of `evals` (SICK reuses its sentences
    across splits) is left out here, so that no generation is spent on an anchor build-dataset would remove. SICK
    writes them without a full stop; one is added, since stage 1 takes only what ends like a sentence. Read in place;
    the corpus is written under data/, never into git."""
    sick = read_sick(sick_train)
    text = pd.concat([sick["s1"], sick["s2"]]).str.strip()
    text = text[text != ""]
    text = pd.Series(pd.unique(text.where(text.str[-1].isin(list(".!?")), text + ".")), dtype=object)
    kept, removed = without_eval_sentences(text.tolist(), evals)
    return pd.DataFrame({"doc_id": [f"sick-train-{i}" for i in range(len(kept))], "text": kept}), removed


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="write SICK train's captions as a corpus JSONL (caption_corpus)")
    ap.add_argument("--sick-train", default=str(SHARED.parent / "sick2014" / "SICK_train.txt"))
    ap.add_argument("out", help="the corpus JSONL to write (under data/)")
    args = ap.parse_args()
    from benchmarks.held_out import SICK_TRIAL
    from tasks.core.decontamination import DEFAULT_EVAL_SETS, collect_eval_sentences

    corpus, removed = caption_corpus(Path(args.sick_train), collect_eval_sentences([*DEFAULT_EVAL_SETS,
                                                                                    str(SICK_TRIAL)]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    corpus.to_json(args.out, orient="records", lines=True)
    print(f"{len(corpus)} captions → {args.out} ({removed} left out: they hold an STS-B dev / test or SICK trial "
          "sentence)")
