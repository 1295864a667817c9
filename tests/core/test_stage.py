"""The stage outline (tasks/core/stage.py) and the shard protocol (tasks/core/shards.py): the key takes the settings
fields each class declares as result-changing, the outline reuses committed outputs, writes the manifest last and
lists every file written through it, and a shard counts as finished only when its marker matches its file."""

from __future__ import annotations

import hashlib
import json
import logging
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tasks.core.stage as stage_module
from tasks.core.config import LLMSettings
from tasks.core.shards import commit_shard, finished_shard
from tasks.core.stage import StageFolder, StageIO, key_fields, run_stage, stage_key
from tasks.core.store import PROJECT, read_manifest, verify_outputs, write_manifest
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


def test_the_stage_key_is_the_sha256_of_its_sorted_json_so_keys_recorded_by_earlier_releases_still_match():
    # Earlier runs' outputs are found by this key: its layout ("stage" beside the parts) is part of the contract.
    assert stage_key("s", n=3) == hashlib.sha256(b'{"n": 3, "stage": "s"}').hexdigest()


def test_check_written_checks_only_parquet_tables_and_skips_only_optional_ones_left_out(tmp_path):
    io = StageIO(reads={}, writes={"model": (), "notes.jsonl": ("text",), "rows.parquet": ("x",),
                                   "pairs.parquet": ("p",)})
    pq.write_table(pa.table({"x": [1]}), tmp_path / "rows.parquet")
    (tmp_path / "notes.jsonl").write_text('{"text": "a"}\n')  # declared fields of a non-table output: not read
    io.check_written("toy", tmp_path, optional=("pairs.parquet",))  # the optional table was left out: fine
    with pytest.raises(FileNotFoundError):  # a table that is not optional must have been written
        io.check_written("toy", tmp_path)
    pq.write_table(pa.table({"q": [1]}), tmp_path / "pairs.parquet")  # written after all: checked like the rest
    with pytest.raises(RuntimeError, match=r"toy wrote pairs.parquet .* \(q\) .* \(p\)"):
        io.check_written("toy", tmp_path, optional=("pairs.parquet",))


def test_check_written_goes_on_past_a_skipped_output_and_names_every_column_in_its_error(tmp_path):
    # A non-table output first: the tables after it are still checked.
    io = StageIO(reads={}, writes={"model": (), "rows.parquet": ("a", "b", "x")})
    pq.write_table(pa.table({"x": [1]}), tmp_path / "rows.parquet")
    with pytest.raises(RuntimeError, match=r"toy wrote rows.parquet with columns its IO.writes does not declare "
                                           r"\(none\) or without declared ones \(a, b\)"):
        io.check_written("toy", tmp_path)
    pq.write_table(pa.table({"x": [1], "c": [2], "d": [3]}), tmp_path / "rows.parquet")
    io = StageIO(reads={}, writes={"rows.parquet": ("x",)})
    with pytest.raises(RuntimeError, match=r"does not declare \(c, d\) or without declared ones \(none\)"):
        io.check_written("toy", tmp_path)


def test_add_commits_a_single_file_and_refuses_one_never_written_naming_it(tmp_path):
    out = StageFolder("toy", tmp_path, "k1", {})
    (tmp_path / "plot.png").write_bytes(b"png")
    assert out.add(tmp_path / "plot.png") == tmp_path / "plot.png"
    assert out.digests == {"plot.png": hashlib.sha256(b"png").hexdigest()}
    with pytest.raises(FileNotFoundError, match=r"missing\.png: a stage output that was never written"):
        out.add(tmp_path / "missing.png")


def test_compute_reusable_and_publish_are_handed_the_stage_folder(tmp_path):
    seen = []

    def compute(out):
        seen.append(("compute", out.stage, out.folder))
        out.write_parquet("rows.parquet", pa.table({"x": [1]}))
        return {}

    def publish(out, body):  # the artifacts link to the committed files
        seen.append(("publish", out.stage, out.committed))

    run_stage("toy", tmp_path, "k1", ROWS, compute, publish)
    run_stage("toy", tmp_path, "k1", ROWS, compute, reusable=lambda folder: seen.append(("reusable", folder)))
    folder = tmp_path / "toy"
    assert seen == [("compute", "toy", folder),
                    ("publish", "toy", {"rows.parquet": folder / "rows.parquet",
                                        "manifest.json": folder / "manifest.json"}),
                    ("reusable", folder), ("compute", "toy", folder)]  # refused by `reusable`: computed again


def test_a_later_run_reuses_an_earlier_runs_stage_by_its_key_without_computing(tmp_path):
    for run in ("run-a", "run-b"):  # versioned runs (what open_run makes): their stages are indexed by key
        (tmp_path / run).mkdir()
        (tmp_path / run / ".run.json").write_text("{}")
    calls = []
    run_stage("toy", tmp_path / "run-a", "k1", ROWS, _compute(calls))
    assert json.loads((tmp_path / ".stage-index" / "toy" / "k1.json").read_text())["key"] == "k1"
    paths = run_stage("toy", tmp_path / "run-b", "k1", ROWS, _compute(calls))
    assert calls == ["k1"] and paths["rows"] == str(tmp_path / "run-b" / "toy" / "rows.parquet")
    assert read_manifest(tmp_path / "run-b" / "toy")["cache_key"] == "k1" and verify_outputs(tmp_path / "run-b" / "toy")


def test_a_reused_stage_is_logged_with_its_key_and_folder_on_the_modules_logger_outside_a_run(tmp_path, caplog):
    run_stage("toy", tmp_path, "0123456789abcdef", ROWS, _compute([]))
    caplog.set_level(logging.INFO, logger="tasks.core.stage")
    run_stage("toy", tmp_path, "0123456789abcdef", ROWS, _compute([]))
    [record] = [r for r in caplog.records if "reusing" in r.getMessage()]
    assert record.name == "tasks.core.stage"
    # the key's first 12 characters and the folder reused: what tells the user the stage was skipped, and why
    assert f"(key 0123456789ab…): reusing {tmp_path / 'toy'}" in record.getMessage()


def test_total_s_counts_from_when_the_stage_began_preparing_to_the_millisecond(tmp_path, monkeypatch):
    monkeypatch.setattr(stage_module, "time", SimpleNamespace(perf_counter=lambda: 112.3456))
    run_stage("toy", tmp_path, "k1", ROWS, _compute([]), started=100.0)
    assert read_manifest(tmp_path / "toy")["timings"] == {"work_s": 0.1, "total_s": 12.346}


def test_the_manifests_command_names_no_local_path(tmp_path, monkeypatch):
    """An argument that is an absolute path under the checkout is written relative to it, the program by its name;
    a path outside every root (a relative one) is kept as given."""
    monkeypatch.setattr("sys.argv", ["/opt/venv/bin/stsgen", "build-dataset", "--run", str(PROJECT / "data" / "g" / "c1"),
                                     "--eval-set", "../shared/SICK trial.txt"])
    (tmp_path / "rows.parquet").write_bytes(b"x")
    write_manifest(tmp_path, {"stage": "toy"}, {"rows.parquet": hashlib.sha256(b"x").hexdigest()})
    assert read_manifest(tmp_path)["command"] == "stsgen build-dataset --run data/g/c1 --eval-set '../shared/SICK trial.txt'"


def test_map_shards_refuses_weights_that_do_not_match_the_shards_before_running_any():
    from tasks.core.runners import ExecutionSettings, map_shards

    ran = []
    with pytest.raises(ValueError, match="1 weights for 2 shards"):
        map_shards(lambda **kw: ran.append(kw), [{}, {}], ExecutionSettings(), 1, weights=[1])
    assert ran == []
