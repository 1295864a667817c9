"""The stage outline (tasks/core/stage.py) and the shard protocol (tasks/core/shards.py): the key takes the settings
fields each class declares as result-changing, the outline reuses committed outputs, writes the manifest last and
lists every file written through it, and a shard counts as finished only when its marker matches its file."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tasks.core.config import LLMSettings
from tasks.core.shards import commit_shard, finished_shard
from tasks.core.stage import StageIO, key_fields, run_stage, stage_key
from tasks.core.store import read_manifest, verify_outputs
from tasks.generate.settings import GenerateSettings, PatternSettings, SamplingSettings, VerifierSettings
from tasks.label.settings import LabelSettings
from tasks.train.settings import TrainSettings


def test_key_fields_leave_out_what_each_settings_class_declares_nested_included():
    base_llm = LLMSettings(base_url="http://a/v1", model="m")
    transport_llm = LLMSettings(base_url="http://b/v1", model="m", max_concurrency=64, timeout_s=5)
    # The judge's endpoint is nested in the stage's settings: its transport fields stay out of the key as well.
    base = GenerateSettings(verifier=VerifierSettings(llm=base_llm))
    transport = GenerateSettings(verifier=VerifierSettings(llm=transport_llm), batch_size=7)
    assert key_fields(base) == key_fields(transport) and key_fields(base_llm) == key_fields(transport_llm)
    assert "output_dir" not in key_fields(base) and "llm" not in key_fields(base)
    assert "batch_size" not in key_fields(base) and "base_url" not in key_fields(base)["verifier"]["llm"]
    assert "base_url" not in key_fields(base_llm)
    assert stage_key("s", settings=base, llm=base_llm) == stage_key("s", settings=transport, llm=transport_llm)
    assert stage_key("s", settings=base, llm=base_llm) != stage_key("s", settings=base, llm=LLMSettings(
        base_url="http://a/v1", model="other"))  # the model changes what comes back
    assert stage_key("s", settings=base, llm=base_llm) != stage_key("s", settings=GenerateSettings(
        verifier=VerifierSettings(llm=LLMSettings(base_url="http://a/v1", model="other"))), llm=base_llm)
    assert stage_key("s", settings=base, llm=base_llm) != stage_key("s", settings=base.model_copy(update={"n": 3}),
                                                                    llm=base_llm)
    assert stage_key("s", settings=base, llm=base_llm) != stage_key("t", settings=base, llm=base_llm)
    assert "device" not in key_fields(TrainSettings()) and "steps" in key_fields(TrainSettings())


def test_pattern_fields_added_later_enter_the_key_only_off_their_earlier_value():
    """A run made before `intermediate_examples` / `intermediate_base` existed (band examples, intermediates from s+)
    keeps its key; the current defaults (deletion-shaped examples, from the anchor) are a different stage output."""
    before = key_fields(PatternSettings(intermediate_examples="band", intermediate_base="positive"))
    assert "intermediate_examples" not in before and "intermediate_base" not in before
    now = key_fields(PatternSettings())
    assert (now["intermediate_examples"], now["intermediate_base"]) == ("deletion", "anchor")
    assert key_fields(PatternSettings(intermediate_base="positive")) != now
    # the intermediates' best-of-N rule likewise: the rule before it ('pattern_cosine') leaves the key unchanged
    assert "intermediate_choice" not in key_fields(SamplingSettings(intermediate_choice="pattern_cosine"))
    assert key_fields(SamplingSettings())["intermediate_choice"] == "fewest_added"


def test_label_settings_key_leaves_out_a_served_lm_url_and_the_scores_leave_out_label_only_fields():
    local = LabelSettings(method="context")
    assert {"lm", "threads", "device"} & set(key_fields(local)) == {"lm"}
    served = LabelSettings(method="context", lm="smollm2-135m-instruct",
                           lm_endpoint={"base_url": "http://user:secret@host:8000/v1", "model": "m"})
    assert "secret" not in json.dumps(key_fields(served)) and "max_concurrency" not in key_fields(served)["lm_endpoint"]
    assert key_fields(served)["lm"] == "smollm2-135m-instruct" and key_fields(served)["lm_endpoint"]["model"] == "m"
    rated = local.model_copy(update={"method": "combined", "rating_weight": 0.3})
    assert local.score_fields() == rated.score_fields()  # a new mix re-scores nothing
    assert key_fields(local) != key_fields(rated)  # but is a new stage output


def _compute(calls: list, fail: bool = False):
    def compute(out):
        calls.append(out.key)
        out.write_parquet("rows.parquet", pa.table({"x": [1, 2]}))
        (out.folder / "model").mkdir(exist_ok=True)
        (out.folder / "model" / "weights.bin").write_bytes(b"w")
        out.add(out.folder / "model")
        if fail:
            raise RuntimeError("killed mid-stage")
        return {"counts": {"rows": 2}, "timings": {"work_s": 0.1}}
    return compute


def test_run_stage_computes_once_writes_the_manifest_last_and_reuses(tmp_path):
    calls, published = [], []
    files = StageIO(reads={}, writes={"rows.parquet": ("x",), "model": ()})
    paths = run_stage("toy", tmp_path, "k1", files, _compute(calls), lambda out, m: published.append(m["counts"]))
    folder = tmp_path / "toy"
    assert paths == {"rows": str(folder / "rows.parquet"), "model": str(folder / "model"),
                     "manifest": str(folder / "manifest.json")}
    manifest = read_manifest(folder)
    assert manifest["stage"] == "toy" and manifest["cache_key"] == "k1" and manifest["counts"] == {"rows": 2}
    assert set(manifest["outputs"]) == {"rows.parquet", "model/weights.bin"} and verify_outputs(folder)
    assert set(manifest["timings"]) == {"work_s", "total_s"} and published == [{"rows": 2}]

    assert run_stage("toy", tmp_path, "k1", files, _compute(calls)) == paths
    assert calls == ["k1"]  # reused: nothing computed, nothing published
    run_stage("toy", tmp_path, "k1", files, _compute(calls), reusable=lambda folder: False)
    run_stage("toy", tmp_path, "k2", files, _compute(calls))
    assert calls == ["k1", "k1", "k2"] and read_manifest(folder)["cache_key"] == "k2"


ROWS = StageIO(reads={}, writes={"rows.parquet": ("x",)})


def test_a_stage_that_fails_mid_way_leaves_no_commit(tmp_path):
    with pytest.raises(RuntimeError):
        run_stage("toy", tmp_path, "k1", ROWS, _compute([], fail=True))
    assert (tmp_path / "toy" / "rows.parquet").is_file() and read_manifest(tmp_path / "toy") is None
    calls = []
    run_stage("toy", tmp_path, "k1", ROWS, _compute(calls))
    assert calls == ["k1"]  # not taken as done: computed again


def test_a_stage_that_writes_an_undeclared_column_commits_nothing(tmp_path):
    """IO.writes is the one declaration of a stage's outputs, checked against what the stage wrote."""
    undeclared = StageIO(reads={}, writes={"rows.parquet": ("y",)})  # the stage writes x
    with pytest.raises(RuntimeError, match=r"toy wrote rows.parquet with columns its IO.writes does not declare "
                                           r"\(x\) or without declared ones \(y\)"):
        run_stage("toy", tmp_path, "k1", undeclared, _compute([]))
    assert read_manifest(tmp_path / "toy") is None  # nothing committed
    named = StageIO(reads={}, writes={"rows.parquet": ("x",)}, names={"rows.parquet": "table"})
    assert set(run_stage("toy", tmp_path, "k1", named, _compute([]))) == {"table", "manifest"}


def test_a_stage_writing_a_column_beyond_its_declaration_is_refused(tmp_path):
    """Every declared column written, one more besides: still a broken contract (the check is not only for missing
    columns), refused before the manifest commits."""
    def compute(out):
        out.write_parquet("rows.parquet", pa.table({"x": [1, 2], "undeclared": ["a", "b"]}))
        return {"counts": {"rows": 2}}

    with pytest.raises(RuntimeError, match=r"toy wrote rows.parquet with columns its IO.writes does not declare "
                                           r"\(undeclared\) or without declared ones \(none\)"):
        run_stage("toy", tmp_path, "k1", ROWS, compute)
    assert read_manifest(tmp_path / "toy") is None


def test_a_shard_is_finished_only_when_its_marker_matches_its_file(tmp_path):
    out = tmp_path / "s" / "abc.parquet"
    assert finished_shard(out) is None
    commit_shard(out, pa.table({"x": [1]}), {"rows": 1})
    assert finished_shard(out) == {"rows": 1}
    out.with_suffix(".json").write_text('{"sha256": ')  # torn marker
    assert finished_shard(out) is None
    commit_shard(out, pa.table({"x": [1]}), {"rows": 1})
    out.write_bytes(out.read_bytes() + b"x")  # the file altered after its marker
    assert finished_shard(out) is None


def test_a_json_output_is_committed_with_its_digest_and_scratch_space_is_keyed_and_outside_the_outputs(tmp_path):
    seen = {}

    def compute(out):
        scratch = out.work_dir("shards", "0123456789abcdef-the-rest")
        scratch.mkdir(parents=True)
        (scratch / "part.txt").write_text("half done")
        seen["scratch"] = scratch
        out.write_json("eval.json", {"dev": 87.5})
        return {}

    run_stage("toy", tmp_path, "k1", StageIO(reads={}, writes={"eval.json": ()}), compute)
    folder = tmp_path / "toy"
    assert seen["scratch"] == folder / ".shards" / "0123456789abcdef"  # the key's first 16 characters
    assert json.loads((folder / "eval.json").read_text()) == {"dev": 87.5}
    manifest = read_manifest(folder)
    assert set(manifest["outputs"]) == {"eval.json"} and verify_outputs(folder)  # scratch is no output
    (folder / "eval.json").write_text('{"dev": 99}')
    assert not verify_outputs(folder)  # its digest is the file's: an edit is seen
