"""(d) Truncated / corrupted files are detected by checksum, never read as valid, and rebuilt: a stage output
(triples.parquet, contexts.parquet, pairs.parquet), a label shard, an LLM response-cache entry. The rebuild reuses
everything that still verifies (counted) and reproduces the original outputs."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tasks.llm.server import free_port
from tests.faults.conftest import spec, stage_table
from tests.faults.processes import ScriptedServerProcess, finish, pipeline_process


def truncate(path: Path) -> None:
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])


def flip_bytes(path: Path) -> None:
    data = bytearray(Path(path).read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    Path(path).write_bytes(bytes(data))


def copied_run(reference_run: dict, work: Path) -> dict:
    """The reference run's work folder (outputs, shards, response cache) copied to `work`: its outputs re-pointed."""
    shutil.copytree(reference_run["work"], work, dirs_exist_ok=True)
    old = str(reference_run["work"])
    return json.loads(json.dumps(reference_run["outputs"]).replace(json.dumps(old)[1:-1], json.dumps(str(work))[1:-1]))


def test_corrupt_outputs_shards_and_cache_entries_are_rebuilt(tmp_path, fault_corpus, tiny_lm_dir,
                                                              tiny_encoder_dir, child_env, reference_run):
    first = copied_run(reference_run, tmp_path)  # an undisturbed run's files, corrupted below (no run of its own)
    with ScriptedServerProcess(free_port(), tmp_path / "rerun-requests.log") as server:
        run_spec = spec(server, tmp_path, fault_corpus, tiny_lm_dir, tiny_encoder_dir)
        tables = {(s, t): stage_table(first, s, t) for s, t in (
            ("generate-sts-triples", "triples"), ("retrieve-contexts", "contexts"), ("label-pairs", "pairs"))}

        truncate(first["generate-sts-triples"]["triples"])
        flip_bytes(first["retrieve-contexts"]["contexts"])
        truncate(first["label-pairs"]["pairs"])
        shard = sorted((tmp_path / "out" / "label-pairs").glob(".shards/*/*.parquet"))[0]
        shard_scores = json.loads(shard.with_suffix(".json").read_text())["counts"]["sentence_context_scores"]
        flip_bytes(shard)
        with sqlite3.connect(tmp_path / "llm.sqlite") as db:  # one cached answer no longer matches its checksum
            db.execute("UPDATE responses SET payload = replace(payload, 'e', 'E') WHERE rowid = "
                       "(SELECT MIN(rowid) FROM responses)")
        sent = server.requests()

        again = finish(pipeline_process(run_spec, child_env))
        resent = server.requests() - sent

    assert resent == 1  # only the corrupted cache entry is asked again
    stage1 = json.loads(Path(again["generate-sts-triples"]["manifest"]).read_text())
    assert stage1["llm_stats"]["requests_sent"] == 1 and stage1["llm_stats"]["cache_hits"] >= 14
    labels = json.loads(Path(again["label-pairs"]["manifest"]).read_text())["counts"]
    assert labels["sentence_context_scores_this_run"] == shard_scores  # only the corrupted shard is re-scored
    for (stage, table), expected in tables.items():
        assert stage_table(again, stage, table).equals(expected), stage
