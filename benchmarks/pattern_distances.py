"""Pattern distances of stage-1 runs side by side: per relation (a, s⁺), (a, sᵐ), (a, s⁻), the 1-D Wasserstein distance
between the generated pairs' MER / MiniLM cosine and those of STS-B dev's score bands (the report-patterns stage's
measure, tasks/report/pattern_report.py), one row per run folder; and the intermediates that add no content word to
their anchor (tasks/generate/validation.added_words: the reading criterion "the anchor with details left out").

    .venv/bin/python -m benchmarks.pattern_distances /tmp/r24/old100 /tmp/r24/n100
    .venv/bin/python -m benchmarks.pattern_distances --common RUN_A RUN_B   # only the sources every run completed
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tasks.contracts import read_triples
from tasks.core.sts_data import read_stsb
from tasks.generate.validation import added_words
from tasks.report.pattern_report import pattern_distances, pattern_measures, relation_pairs


def main() -> None:
    from sentence_transformers import SentenceTransformer

    from tasks.llm.local_models import encoder_folder

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run folders")
    ap.add_argument("--common", action="store_true", help="only the source sentences every run completed")
    args = ap.parse_args()
    frames = {run: read_triples(Path(run) / "generate-sts-triples" / "triples.parquet") for run in args.runs}
    if args.common:
        shared = set.intersection(*(set(f["source_id"]) for f in frames.values()))
        frames = {run: f[f["source_id"].isin(shared)].reset_index(drop=True) for run, f in frames.items()}
    model = SentenceTransformer(str(encoder_folder("all-minilm-l6-v2")), device="cpu")
    stsb = read_stsb("dev")
    print("| run | relation | pairs | MER gen / STS-B | W(MER) | cosine gen / STS-B | W(cosine) |\n|---|---|---|---|---|---|---|")
    for run, frame in frames.items():
        measures = pattern_measures(relation_pairs(frame, stsb),
                                    lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True))
        for relation, d in pattern_distances(measures).items():
            print(f"| {Path(run).name} | {relation} | {d['pairs']} | {d['mer_mean']:.3f} / {d['stsb_mer_mean']:.3f} | "
                  f"{d['mer_wasserstein']:.3f} | {d['cosine_mean']:.3f} / {d['stsb_cosine_mean']:.3f} | "
                  f"{d['cosine_wasserstein']:.3f} |")
    print("\n| run | intermediates | adding no content word to the anchor |\n|---|---|---|")
    for run, frame in frames.items():
        rows = frame[frame["intermediate"].notna()]
        clean = sum(not added_words(m, a) for a, m in zip(rows["anchor"], rows["intermediate"]))
        print(f"| {Path(run).name} | {len(rows)} | {clean} ({clean / max(len(rows), 1):.0%}) |")


if __name__ == "__main__":
    main()
