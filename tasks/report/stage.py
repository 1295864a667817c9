"""The `report-patterns` stage: the pattern-complexity report of a run's triples (tasks/report/pattern_report.py),
in the stage outline (tasks.core.stage).

triples.parquet + an encoder (stage 4's backbone) + STS-B dev → pattern_complexity.png (Match Error Rate and
encoder-cosine densities per relation, generated vs STS-B dev), patterns.json (per-pair values and the distances);
the manifest holds the distances under `distances`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tasks.contracts import TRIPLE_SLOTS, StageIO, read_triples
from tasks.core.artifacts import publish_image, publish_table
from tasks.core.stage import StageFolder, run_logger, stage_key
from tasks.core.store import sha256_path
from tasks.core.sts_data import read_stsb, stsb_version
from tasks.llm.local_models import encoder_folder
from tasks.report.pattern_report import pattern_distances, pattern_measures, plot_pattern_complexity, relation_pairs

STAGE = "report-patterns"
CODE_VERSION = "patterns-v1"
IO = StageIO(reads={"generate-sts-triples/triples.parquet": TRIPLE_SLOTS}, writes={"pattern_complexity.png": (), "patterns.json": ()},
             names={"pattern_complexity.png": "plot", "patterns.json": "report"})


@dataclass
class PatternJob:
    """The report's inputs by content: the triples and the encoder folder."""

    inputs: list[dict]
    encoder: str

    def key(self) -> str:
        return stage_key(STAGE, code=CODE_VERSION, inputs=[i["sha256"] for i in self.inputs], stsb=stsb_version())


def prepare_patterns(triples: str, encoder: str) -> PatternJob:
    model_dir = encoder_folder(encoder)  # an unknown encoder fails here, nothing written
    return PatternJob([{"path": triples, "sha256": sha256_path(Path(triples)), "role": "triples"},
                       {"path": str(model_dir), "sha256": sha256_path(model_dir), "role": "encoder"}], encoder)


def report(job: PatternJob, out: StageFolder) -> dict:
    """Measure MER and encoder cosine per relation, generated vs STS-B dev; write the plot and patterns.json."""
    from sentence_transformers import SentenceTransformer  # lazy: ~2 s to import

    frame: pd.DataFrame = read_triples(Path(job.inputs[0]["path"]), IO.reads["generate-sts-triples/triples.parquet"])
    pairs = relation_pairs(frame, read_stsb("dev"))
    model = SentenceTransformer(job.inputs[1]["path"])  # its own choice: CUDA if present, else CPU
    measures = pattern_measures(pairs, lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True))
    distances = pattern_distances(measures)
    out.add(plot_pattern_complexity(measures, out.folder / "pattern_complexity.png"))
    values = {rel: {side: {k: v.round(4).tolist() for k, v in m.items()} for side, m in sides.items()}
              for rel, sides in measures.items()}
    out.write_json("patterns.json", {"distances": distances, "values": values})
    return {"code_version": CODE_VERSION, "inputs": job.inputs,
            "parameters": {"encoder": job.encoder, "stsb": stsb_version(), "bands": "positive > 4, intermediate 1–4, "
                           "negative < 1 (STS-B dev gold)"},
            "distances": distances, "counts": {r: d["pairs"] for r, d in distances.items()}}


def publish_patterns(out: StageFolder, manifest: dict) -> None:
    rows = [{"relation": r, **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()}}
            for r, d in manifest["distances"].items()]
    publish_table("patterns-distances", rows, "Generated vs STS-B dev: Wasserstein distance of MER and cosine")
    publish_image("patterns-complexity", out.folder / "pattern_complexity.png",
                  "Pattern complexity: MER and backbone cosine, generated vs STS-B dev")
    for r in rows:
        run_logger().info(f"(a, {r['relation']}): MER {r['mer_mean']:.3f} vs STS-B {r['stsb_mer_mean']:.3f} "
                          f"(W {r['mer_wasserstein']:.3f}); cosine {r['cosine_mean']:.3f} vs "
                          f"{r['stsb_cosine_mean']:.3f} (W {r['cosine_wasserstein']:.3f})")
