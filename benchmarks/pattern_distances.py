"""Pattern distances of stage-1 runs side by side: per relation (a, s⁺), (a, sᵐ), (a, s⁻), the 1-D Wasserstein distance
between the generated pairs' MER / MiniLM cosine and those of STS-B dev's score bands (the report-patterns stage's
measure, tasks/report/pattern_report.py), one row per run folder.

    .venv/bin/python -m benchmarks.pattern_distances /tmp/r24/old100 /tmp/r24/n100
"""

from __future__ import annotations

import sys
from pathlib import Path

from tasks.contracts import read_triples
from tasks.core.sts_data import read_stsb
from tasks.report.pattern_report import pattern_distances, pattern_measures, relation_pairs


def main() -> None:
    from sentence_transformers import SentenceTransformer

    from tasks.llm.local_models import encoder_folder

    model = SentenceTransformer(str(encoder_folder("all-minilm-l6-v2")), device="cpu")
    stsb = read_stsb("dev")
    print("| run | relation | pairs | MER gen / STS-B | W(MER) | cosine gen / STS-B | W(cosine) |\n|---|---|---|---|---|---|---|")
    for run in sys.argv[1:]:
        frame = read_triples(Path(run) / "generate-sts-triples" / "triples.parquet")
        measures = pattern_measures(relation_pairs(frame, stsb),
                                    lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True))
        for relation, d in pattern_distances(measures).items():
            print(f"| {Path(run).name} | {relation} | {d['pairs']} | {d['mer_mean']:.3f} / {d['stsb_mer_mean']:.3f} | "
                  f"{d['mer_wasserstein']:.3f} | {d['cosine_mean']:.3f} / {d['stsb_cosine_mean']:.3f} | "
                  f"{d['cosine_wasserstein']:.3f} |")


if __name__ == "__main__":
    main()
