"""Fixtures of the fault-injection suite: one corpus, one undisturbed reference run of the tiny sts-pipeline."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.contracts import VOLATILE_COLUMNS
from tasks.llm.server import free_port
from tests.conftest import write_topic_corpus
from tests.faults.processes import ScriptedServerProcess, finish, pipeline_process


@pytest.fixture(scope="session")
def fault_corpus(tmp_path_factory) -> Path:
    return write_topic_corpus(tmp_path_factory.mktemp("fault-corpus") / "topics")


def spec(server, work: Path, corpus: Path, lm: Path, encoder: Path, **extra) -> dict:
    """The child's parameters (JSON): plain values tests.faults.processes._pipeline puts into the stage settings."""
    return dict(base_url=server.base_url, work=str(work), corpus=str(corpus), lm=str(lm), encoder=str(encoder),
                max_workers=1, label_shard_size=1,  # one shard at a time, one unit per shard: many resume points
                train=extra.pop("train", False), **extra)  # stage 4's resume is tested in tests/train/test_training.py


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory, fault_corpus, tiny_lm_dir, tiny_encoder_dir, child_env) -> dict:
    """The undisturbed run every faulty run is compared with: its outputs and the distinct LLM requests it sent
    (their body digests; a request retried after a transient error counts once)."""
    work = tmp_path_factory.mktemp("reference")
    with ScriptedServerProcess(free_port(), work / "requests.log") as server:
        outputs = finish(pipeline_process(spec(server, work, fault_corpus, tiny_lm_dir, tiny_encoder_dir),
                                          child_env))
        bodies = set(server.bodies())
        return {"outputs": outputs, "bodies": bodies, "requests": len(bodies), "work": work}


def cached_answers(work: Path) -> int:
    """Answers the client has received and stored (the server's own count runs ahead of delivery)."""
    try:
        with sqlite3.connect(work / "llm.sqlite") as db:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0


def stage_table(outputs: dict, stage: str, name: str):
    table = pq.read_table(outputs[stage][name])
    return table.drop([c for c in VOLATILE_COLUMNS if c in table.column_names])
