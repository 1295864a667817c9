"""Flow `build-dataset`: one dataset grown across runs (tasks/dataset/build.py).

finished runs under `runs_dir` (or the `runs` named) → their triples and pairs, unioned oldest first → sentences of
the evaluation sets out → exact, near-duplicate (MinHash) and paraphrase (encoder) anchors out, the first kept
→ `<output_dir>/ds-<key>/`: triples.parquet, pairs.parquet, removed.parquet, hf/, README.md (the card), manifest.json;
`<output_dir>/latest` → it. The same runs and settings give the same version (found, not rebuilt).
"""

from __future__ import annotations

from prefect import flow

from tasks.core.runs import DATASETS_DIR, OUTPUTS_DIR
from tasks.core.stage import run_logger
from tasks.dataset.build import build_version, prepare_build, publish_build
from tasks.dataset.settings import DatasetSettings
from tasks.dataset.sources import labeler_note


@flow(name="build-dataset")
def build_dataset(
    runs_dir: str = OUTPUTS_DIR,
    runs: list[str] | None = None,
    settings: DatasetSettings = DatasetSettings(),
    output_dir: str = DATASETS_DIR,
) -> dict[str, str]:
    """Build (or find) the dataset version of the finished runs under `runs_dir`, or of the run folders in `runs`.
    Returns its folder and files."""
    job = prepare_build(runs_dir, runs, settings)  # bad input fails here, nothing written
    if note := labeler_note(job.runs):
        run_logger().warning(note)
    folder, manifest, reused = build_version(job, output_dir)
    return publish_build(folder, manifest, reused)
