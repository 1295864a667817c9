"""Flow `report-patterns`: the pattern-complexity report of a run's triples (tasks/report/stage.py).

triples.parquet + the stage-4 backbone (an encoder) + STS-B dev → `<output_dir>/<run>/report-patterns/`:
pattern_complexity.png (Match Error Rate and backbone-cosine densities per relation, generated vs STS-B dev),
patterns.json (per-pair values and the distances), manifest.json (the distances under `distances`). The plot is an
image artifact and the distances a table in the Prefect UI. Unchanged inputs → reused.
"""

from __future__ import annotations

import time
from functools import partial

from prefect import flow

from tasks.core.defaults import DEFAULT_ENCODER
from tasks.core.runs import OUTPUTS_DIR, run_scoped
from tasks.core.stage import run_stage
from tasks.report.stage import IO, STAGE, prepare_patterns, publish_patterns, report


@flow(name=STAGE)
@run_scoped
def report_patterns(triples: str, encoder: str = DEFAULT_ENCODER, output_dir: str = OUTPUTS_DIR,
                    run: str | None = None) -> dict[str, str]:
    """Pattern complexity of `triples` next to STS-B dev; `encoder`: the backbone whose cosine is measured (a name
    or a sentence-transformers / transformers folder)."""
    started = time.perf_counter()
    job = prepare_patterns(triples, encoder)
    return run_stage(STAGE, output_dir, job.key(), IO, partial(report, job), publish_patterns,
                     started=started)
