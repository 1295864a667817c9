"""benchmarks/grow_anchors.sh's chunk bookkeeping and anchors_curve.sh's dataset, with a recording stand-in for
`./stsgen` (STSGEN): which stage runs for which chunk, what is committed, what a later session (an empty run folder)
restores and goes on from, which chunks the curve's dataset is built from. The stand-in writes each stage's manifest
and outputs the way the real stages name them."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import PROJECT

GROW = PROJECT / "benchmarks" / "grow_anchors.sh"
CURVE = PROJECT / "benchmarks" / "anchors_curve.sh"

# `stsgen <stage> … --output-dir O --run R`: refuse a missing input file; log the call; write <O>/<R>/<stage folder>/
# its outputs and a manifest naming them as tasks/core/store.py write_manifest does. STAND_IN_FAIL=<stage> fails it.
# A --corpus is logged last. `build-dataset`: refuse a --run that is not a labeled run folder; log the runs' names
# (in the order given) and the evaluation sets; write the version's tables under <output-dir>/latest. `ui --port P`:
# log the port and whether the scheduler is on, then answer /api/health there until killed; `serve`: wait to be killed.
STAND_IN = """\
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
stage, args = sys.argv[1], sys.argv[2:]
opt = lambda name: args[args.index(name) + 1]
def log(*words):
    with open(os.environ["STAND_IN_LOG"], "a") as fh:
        fh.write(" ".join(words) + "\\n")
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()
if stage == "ui":
    log(stage, opt("--port"), "scheduler=" + os.environ.get("PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED", "on"))
    HTTPServer(("127.0.0.1", int(opt("--port"))), Health).serve_forever()
if stage == "serve":
    log(stage)
    time.sleep(600)
if stage == "build-dataset":
    runs = [Path(a) for o, a in zip(args, args[1:]) if o == "--run"]
    for run in runs:
        if not all((run / s / "manifest.json").is_file() for s in ("generate-sts-triples", "label-pairs")):
            sys.exit(f"{run}: not a labeled run folder")
    log(stage, *[r.name for r in runs], *[Path(a).name for o, a in zip(args, args[1:]) if o == "--eval-set"])
    latest = Path(opt("--output-dir")) / "latest"
    latest.mkdir(parents=True)
    for name in ("triples.parquet", "pairs.parquet", "removed.parquet", "manifest.json", "README.md"):
        (latest / name).write_text(name)
    sys.exit(0)
for flag in ("--sentences", "--triples", "--contexts"):
    if flag in args and not Path(opt(flag)).is_file():
        sys.exit(f"{flag} {opt(flag)}: no such file")
log(stage, opt("--run"), *([opt("--seed"), opt("--n")] if stage == "generate" else []),
    *([opt("--corpus")] if "--corpus" in args else []))
if os.environ.get("STAND_IN_FAIL") == stage:
    sys.exit(3)
folder, outputs = {"generate": ("generate-sts-triples", ["triples.parquet", "rejected.parquet"]),
                   "retrieve": ("retrieve-contexts", ["contexts.parquet", "rejected.parquet"]),
                   "label": ("label-pairs", ["pairs.parquet", "rejected.parquet", "label_distribution.png"])}[stage]
out = Path(opt("--output-dir")) / opt("--run") / folder
out.mkdir(parents=True, exist_ok=True)
for name in outputs:
    (out / name).write_text(f"{stage} {opt('--run')} {name}")
(out / "manifest.json").write_text(json.dumps({"outputs": {name: {"sha256": "0" * 64} for name in outputs}}))
"""

# The Prefect CLI (CURVE_PREFECT): `deployment inspect` finds the deployment; `deployment run … --params -` logs its
# arguments and the parameters read from stdin, and writes the run's eval.json and manifest.json under output_dir.
PREFECT_STAND_IN = """\
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
if args[:2] == ["deployment", "inspect"]:
    sys.exit(0)
params = json.load(sys.stdin)
with open(os.environ["STAND_IN_LOG"], "a") as fh:
    fh.write("prefect " + " ".join(args) + "\\nparams " + json.dumps(params) + "\\n")
out = Path(params["output_dir"]) / "latest" / "train-surrogate"
out.mkdir(parents=True)
(out / "eval.json").write_text(json.dumps({"train": params["train"]}))
(out / "manifest.json").write_text(json.dumps({"runs": [Path(run).name for run in params["runs"]]}))
"""


@pytest.fixture
def grow(tmp_path):
    """grow(*args, fail=None) runs the script against tmp folders; returns (rc, the stand-in's calls so far)."""
    stand_in = tmp_path / "stsgen"
    stand_in.write_text(f"#!{sys.executable}\n{STAND_IN}")
    stand_in.chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    python = tmp_path / "python"  # the curve's harness: `python -m benchmarks.data_value …` logs its arguments,
    python.write_text(f"#!{sys.executable}\nimport os, shlex, sys\n"  # quoted as a shell would need them
                      "open(os.environ['STAND_IN_LOG'], 'a').write(shlex.join(sys.argv[2:]) + '\\n')\n")
    python.chmod(0o755)
    prefect = tmp_path / "prefect"
    prefect.write_text(f"#!{sys.executable}\n{PREFECT_STAND_IN}")
    prefect.chmod(0o755)

    def run(*args, fail: str | None = None, script: Path = GROW, out: str = "growth",
            env: dict[str, str] | None = None) -> tuple[int, list[str]]:
        env = {**os.environ, "STSGEN": str(stand_in), "CURVE_PYTHON": str(python), "GROW_OUT": str(tmp_path / out),
               "GROW_KEPT": str(tmp_path / "kept"), "STAND_IN_LOG": str(log), "STAND_IN_FAIL": fail or "",
               "CURVE_PREFECT": str(prefect), "CURVE_RESULTS": str(tmp_path / "results"),
               "WEEKLY_STUDENT": "", "WEEKLY_STEPS": "", "WEEKLY_SEED": "",  # a developer's own settings stay out
               **(env or {})}
        done = subprocess.run(["bash", str(script), *map(str, args)], env=env, capture_output=True, text=True)
        print(done.stderr)  # shown when a test fails
        return done.returncode, log.read_text().splitlines()
    return run


def test_each_chunk_runs_its_three_stages_in_order_and_is_committed(grow, tmp_path):
    rc, calls = grow(2, 5)
    assert rc == 0
    assert calls == ["generate chunk-01 101 5", "retrieve chunk-01", "label chunk-01",
                     "generate chunk-02 102 5", "retrieve chunk-02", "label chunk-02"]
    kept = tmp_path / "kept"
    for chunk in ("chunk-01", "chunk-02"):
        assert sorted(p.name for p in (kept / chunk).iterdir()) == ["label-pairs", "manifest.json",
                                                                   "rejected.parquet", "triples.parquet"]
        assert sorted(p.name for p in (kept / chunk / "label-pairs").iterdir()) == [
            "label_distribution.png", "manifest.json", "pairs.parquet", "rejected.parquet"]
        assert (kept / chunk / "label-pairs" / "pairs.parquet").read_text() == f"label {chunk} pairs.parquet"
    assert not list(kept.rglob("contexts.parquet"))  # stage 2's outputs stay out of git
    assert (kept / "chunk-01" / "rejected.parquet").read_text() == "generate chunk-01 rejected.parquet"
    assert grow(2, 5) == (0, calls)  # all committed: nothing runs again


def test_a_later_session_restores_the_committed_chunks_and_goes_on_with_the_next(grow, tmp_path):
    grow(1, 5)
    (tmp_path / "growth").rename(tmp_path / "previous-session")
    rc, calls = grow("--restore", 3, 5)
    assert rc == 0 and len(calls) == 3  # restoring runs nothing, and stops at the committed ones
    restored = tmp_path / "growth" / "chunk-01"
    assert json.loads((restored / "generate-sts-triples" / "manifest.json").read_text())["outputs"]
    assert (restored / "label-pairs" / "pairs.parquet").read_text() == "label chunk-01 pairs.parquet"
    assert not (tmp_path / "growth" / "chunk-02").exists()
    rc, calls = grow(3, 5)
    assert rc == 0 and calls[3:] == ["generate chunk-02 102 5", "retrieve chunk-02", "label chunk-02",
                                     "generate chunk-03 103 5", "retrieve chunk-03", "label chunk-03"]


def test_a_chunk_committed_at_stage_1_goes_on_with_stages_2_and_3(grow, tmp_path):
    rc, calls = grow(1, 5, fail="label")
    assert rc != 0 and calls == ["generate chunk-01 101 5", "retrieve chunk-01", "label chunk-01"]
    kept = tmp_path / "kept" / "chunk-01"
    assert (kept / "triples.parquet").exists() and not (kept / "label-pairs").exists()  # a failed stage: not kept
    rc, calls = grow(1, 5)
    assert rc == 0 and calls[3:] == ["retrieve chunk-01", "label chunk-01"]  # stage 1 is not redone
    assert (kept / "label-pairs" / "manifest.json").exists()


def test_a_chunk_whose_stage_1_fails_is_not_committed_and_nothing_after_it_runs(grow, tmp_path):
    rc, calls = grow(2, 5, fail="generate")
    assert rc != 0 and calls == ["generate chunk-01 101 5"]
    assert not (tmp_path / "kept" / "chunk-01").exists()


def test_the_curves_dataset_is_built_from_the_labeled_chunks_in_chunk_order(grow, tmp_path):
    grow(2, 5)
    grow(3, 5, fail="label")  # chunk-03: stage 1 only
    (tmp_path / "growth").rename(tmp_path / "previous-session")  # a later session: only the commits are left
    rc, calls = grow("dataset", script=CURVE)
    assert rc == 0
    assert calls[-1] == "build-dataset chunk-01 chunk-02 SICK_trial.txt"  # not chunk-03, and SICK trial out of it
    runs = sorted((tmp_path / "growth-labeled").iterdir())
    assert [r.name for r in runs] == ["chunk-01", "chunk-02"]
    assert not any((r / ".run.json").exists() for r in runs)  # build-dataset then orders them by name
    assert (runs[0] / "generate-sts-triples" / "triples.parquet").read_text() == "generate chunk-01 triples.parquet"
    version = tmp_path / "kept" / "dataset"
    assert sorted(p.name for p in version.iterdir()) == ["README.md", "manifest.json", "pairs.parquet",
                                                         "removed.parquet", "triples.parquet"]


def test_the_curves_dataset_is_refused_without_a_labeled_chunk(grow, tmp_path):
    grow(1, 5, fail="label")
    rc, calls = grow("dataset", script=CURVE)
    assert rc != 0 and not any(c.startswith("build-dataset") for c in calls)
    assert not (tmp_path / "kept" / "dataset").exists()


def flags(call: str) -> dict[str, str]:
    """A harness call's options as argparse reads them: a repeated option's last value."""
    words = shlex.split(call)
    return {w: v for w, v in zip(words, words[1:] + [""]) if w.startswith("--")}


def test_each_lever_is_the_shipped_recipe_with_one_change(grow, tmp_path, capsys):
    rc, calls = grow("encoder", 200, script=CURVE)
    assert rc == 0 and [c.split()[0] for c in calls] == ["benchmarks.data_value"] * 2
    recipe = flags(calls[1])
    assert recipe["--data"] == "triples+pairs:label" and recipe["--backbone-anchor"] == "50"
    teacher = f"{tmp_path}/growth-weekly-all-mpnet-base-v2-400steps/latest/train-surrogate/model"
    changes = {"400steps": {"--steps": "400"}, "anchor10": {"--backbone-anchor": "10"},
               "mined": {"--data": "mined+pairs:label"}, "pairsonly": {"--data": "pairs:label"},
               "teacher": {"--data": "triples+pairs:teacher"}, "lr3e-5": {"--lr": "3e-5"},
               "anchor0": {"--backbone-anchor": "0"}, "nopairs": {"--data": "triples"},
               "mpnet": {"--source": "all-mpnet-base-v2"},  # a larger student, named: no path in the CSV
               "mpnet400": {"--source": "all-mpnet-base-v2", "--steps": "400"},
               "selfmined": {"--data": "mined+pairs:label", "--miner-name": "weekly",  # the weekly run's model mines
                             "--miner": f"{tmp_path}/growth-weekly/latest/train-surrogate/model"},
               "distilled": {"--data": "triples+pairs:teacher", "--teacher-name": "weekly-mpnet400",  # its teacher:
                             "--teacher": teacher},  # the larger weekly model
               "distilled0": {"--data": "triples+pairs:teacher", "--teacher-name": "weekly-mpnet400",
                              "--teacher": teacher, "--backbone-anchor": "0"}}
    for lever, change in changes.items():
        rc, calls = grow("lever", lever, 200, script=CURVE)
        got = flags(calls[-1])
        assert rc == 0 and set(recipe) <= set(got) and {k: v for k, v in got.items() if recipe.get(k) != v} == {
            **change, "--table-out": f"{tmp_path}/results/anchors_1200_encoder_recipe_{lever}_200.csv"}
    rc, calls = grow("lever", "mpnet", 200, script=CURVE, env={"CURVE_RESULTS": ""})  # unset: the committed folder
    assert rc == 0 and flags(calls[-1])["--table-out"] == "benchmarks/results/anchors_1200_encoder_recipe_mpnet_200.csv"
    rc, calls = grow("lever", "selfmined", 200, script=CURVE, out="my growth")  # a folder name with a space
    assert rc == 0 and flags(calls[-1])["--miner"] == f"{tmp_path}/my growth-weekly/latest/train-surrogate/model"
    capsys.readouterr()
    rc, after = grow("lever", "nothing", script=CURVE)
    said = capsys.readouterr().out  # the script's stderr, printed by the fixture
    assert rc == 2 and after == calls  # refused before any training
    assert "not 'nothing'" in said and all(lever in said for lever in changes)


def test_the_genre_row_grows_anchors_from_the_captions_and_trains_the_recipe_on_their_dataset(grow, tmp_path):
    rc, calls = grow("encoder", 84, script=CURVE)
    recipe = flags(calls[-1])
    rc, calls = grow("genre", script=CURVE)  # its own default size: 84, not the curve's sizes up to 1,200
    genre, corpus = tmp_path / "growth-genre", tmp_path / "growth-genre" / "captions.jsonl"
    assert rc == 0 and calls[2:7] == [  # the corpus, then one chunk's three stages over it, then its dataset
        f"benchmarks.corpora {corpus}", f"generate captions 201 140 {corpus}", "retrieve captions", "label captions",
        "build-dataset captions SICK_trial.txt"]
    assert (genre / "captions" / "label-pairs" / "manifest.json").is_file()
    got, version = flags(calls[7]), tmp_path / "growth-genre-datasets" / "latest"
    assert {k: v for k, v in got.items() if recipe[k] != v} == {  # the recipe, on the captions' dataset
        "--runs": f"{version}/triples.parquet", "--pairs": f"{version}/pairs.parquet",
        "--table-out": f"{tmp_path}/results/anchors_1200_encoder_recipe_genre_84.csv"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_params(calls: list[str]) -> dict:
    """The parameters the Prefect stand-in read for the last weekly run."""
    return json.loads([c for c in calls if c.startswith("params ")][-1][len("params "):])


def test_the_weekly_run_gets_its_parameters_as_json_whatever_the_student_is_named(grow, tmp_path, capsys):
    assert grow(2, 5)[0] == 0  # two labeled chunks committed
    sick = "../shared/data/sick2014/SICK_trial.txt"
    student = Path("models") / 'my "student" \\ v2'  # a folder name that JSON must escape (relative: no local path)
    port = free_port()
    rc, calls = grow("weekly", script=CURVE, env={"WEEKLY_STUDENT": str(student), "WEEKLY_PORT": str(port),
                                                  "WEEKLY_STEPS": "400"})
    weekly, results = tmp_path / f"growth-weekly-{student.name}-400steps", tmp_path / "results"
    assert rc == 0 and f"ui {port} scheduler=false" in calls and "serve" in calls  # its own server, no schedules
    assert "prefect deployment run train-on-dataset/weekly --watch --params -" in calls
    params = run_params(calls)
    assert params == {"runs": [str(tmp_path / "growth-labeled" / c) for c in ("chunk-01", "chunk-02")],
                      "datasets_dir": f"{weekly}-datasets", "output_dir": str(weekly),
                      "dataset": {"eval_sets": ["stsb-dev", "stsb-test", sick]},
                      "train": {"eval_sets": ["stsb-test", sick], "backbone": {"source": str(student)},
                                "steps": 400}}
    copied = results / f"anchors_1200_weekly_{student.name}_400steps"
    assert json.loads((copied / "eval.json").read_text()) == {"train": params["train"]}
    assert json.loads((copied / "manifest.json").read_text()) == {"runs": ["chunk-01", "chunk-02"]}
    rc, calls = grow("weekly", script=CURVE, env={"WEEKLY_PORT": str(free_port())})  # the default student, MiniLM
    params = run_params(calls)
    assert rc == 0 and params["train"] == {"eval_sets": ["stsb-test", sick]}  # TrainSettings' student and steps
    assert params["output_dir"] == str(tmp_path / "growth-weekly")
    assert (results / "anchors_1200_weekly" / "eval.json").is_file()
    local = PROJECT.resolve().parent / "students" / "mine"  # a local path would be committed with the results
    rc, before = grow("weekly", script=CURVE, env={"WEEKLY_STUDENT": str(local), "WEEKLY_PORT": str(free_port())})
    assert rc == 1 and "names a local path" in capsys.readouterr().out
    for name, value in (("STEPS", "4e2"), ("STEPS", "0"), ("STEPS", "400 "), ("SEED", "x"), ("SEED", "-1"),
                        ("SEED", "014")):  # refused before its server starts or a folder is named by it
        rc, after = grow("weekly", script=CURVE, env={f"WEEKLY_{name}": value, "WEEKLY_PORT": str(free_port())})
        assert rc == 2 and after == before and f"WEEKLY_{name} must be a whole number" in capsys.readouterr().out


def test_a_weekly_rerun_with_another_seed_trains_it_into_folders_of_its_own(grow, tmp_path):
    assert grow(2, 5)[0] == 0
    env = {"WEEKLY_STUDENT": "all-mpnet-base-v2", "WEEKLY_STEPS": "400", "WEEKLY_PORT": str(free_port())}
    rc, calls = grow("weekly", script=CURVE, env={**env, "WEEKLY_SEED": "14"})
    params = run_params(calls)
    assert rc == 0 and params["train"]["seed"] == 14 and params["train"]["steps"] == 400
    assert params["output_dir"] == str(tmp_path / "growth-weekly-all-mpnet-base-v2-400steps-seed14")
    seeded = tmp_path / "results" / "anchors_1200_weekly_all-mpnet-base-v2_400steps_seed14"
    assert json.loads((seeded / "eval.json").read_text())["train"]["seed"] == 14
    rc, calls = grow("weekly", script=CURVE, env={**env, "WEEKLY_PORT": str(free_port())})  # the default seed
    assert rc == 0 and "seed" not in run_params(calls)["train"]  # TrainSettings' own, the committed run's folder
    unseeded = tmp_path / "results" / "anchors_1200_weekly_all-mpnet-base-v2_400steps" / "eval.json"
    assert "seed" not in json.loads(unseeded.read_text())["train"]  # each run's results in a folder of its own
    assert json.loads((seeded / "eval.json").read_text())["train"]["seed"] == 14
    rc, calls = grow("lever", "distilled", 1200, script=CURVE, env={"WEEKLY_SEED": "14"})
    assert rc == 0 and flags(calls[-1])["--teacher"].endswith("-400steps/latest/train-surrogate/model")  # seed 13's


def test_the_distilled_levers_teacher_is_where_the_larger_weekly_run_puts_its_model(grow, tmp_path):
    assert grow(2, 5)[0] == 0
    rc, calls = grow("weekly", script=CURVE, env={"WEEKLY_STUDENT": "all-mpnet-base-v2", "WEEKLY_STEPS": "400",
                                                  "WEEKLY_PORT": str(free_port())})
    model = Path(run_params(calls)["output_dir"]) / "latest" / "train-surrogate" / "model"
    assert rc == 0 and model.parent.is_dir()  # the stand-in wrote the run's folder
    for lever in ("distilled", "distilled0"):
        rc, calls = grow("lever", lever, 1200, script=CURVE)
        assert rc == 0 and flags(calls[-1])["--teacher"] == str(model)


def test_the_decoder_rows_search_every_budget_alike_or_keep_the_400_anchor_rows_budget(grow, tmp_path):
    rc, calls = grow("bellm", 800, 13, script=CURVE)
    searched = flags(calls[-1])
    assert rc == 0 and searched["--backbone"] == "bellm" and "--search-budget" in searched
    assert searched["--data"] == "simcse,simcse-paper,triples,triples+pairs:label"  # one search for every row
    assert (searched["--sizes"], searched["--seeds"]) == ("800", "13")
    rc, calls = grow("bellm-fixed", script=CURVE)
    fixed, pairs, longer, simcse, triples = (flags(c) for c in calls[-5:])
    assert rc == 0 and len(calls) == 6  # the calls so far: `bellm`'s one, then `bellm-fixed`'s five
    assert fixed["--backbone"] == "bellm" and "--search-budget" not in fixed
    assert fixed["--data"] == "simcse,simcse-paper,triples" and fixed["--sizes"] == "1200"  # the target's size
    assert fixed["--table-out"] == f"{tmp_path}/results/anchors_1200_bellm_fixed_1200.csv"
    # The labeled pairs beside the triples: a CSV of their own (the committed three rows stay), the same budget.
    assert (pairs["--data"], pairs["--regression-loss"]) == ("triples+pairs:label", "cosent")
    assert pairs["--table-out"] == f"{tmp_path}/results/anchors_1200_bellm_fixed_pairs_1200.csv"
    assert {k: v for k, v in pairs.items() if k not in ("--data", "--regression-loss", "--table-out")} == {
        k: v for k, v in fixed.items() if k not in ("--data", "--table-out")}
    # The same row at 200 steps, so the alternating sampler gives the triples the triples row's 100 batches.
    assert longer["--table-out"] == f"{tmp_path}/results/anchors_1200_bellm_fixed_pairs_200steps_1200.csv"
    assert {**pairs, "--steps": "200", "--table-out": longer["--table-out"]} == longer
    # SimCSE at those 200 steps too (its best was its last step at 100): the longer row's like-for-like base.
    assert simcse["--table-out"] == f"{tmp_path}/results/anchors_1200_bellm_fixed_simcse_200steps_1200.csv"
    assert {**fixed, "--data": "simcse", "--steps": "200", "--table-out": simcse["--table-out"]} == simcse
    # And the triples alone at 200: the longer row less its labeled pairs, so the labels are told from the steps.
    assert triples["--table-out"] == f"{tmp_path}/results/anchors_1200_bellm_fixed_triples_200steps_1200.csv"
    assert {**fixed, "--data": "triples", "--steps": "200", "--table-out": triples["--table-out"]} == triples
    # Like for like with the committed 400-anchor CPU rows: their steps, lr and precision, and the harness's batch.
    committed = pd.read_csv(PROJECT / "benchmarks" / "results" / "data_value_bellm_400_cpu.csv")
    assert committed[["steps", "lr", "precision"]].drop_duplicates().shape[0] == 1
    row = committed.iloc[0]
    assert (int(fixed["--steps"]), float(fixed["--lr"])) == (row["steps"], row["lr"])
    assert fixed["--precision"] == "auto" and row["precision"] == "bfloat16"  # their command's `auto`: bf16 here
    assert "--batch-size" not in fixed and "--backbone-anchor" not in fixed  # the harness's own batch, as then


def test_a_rung_of_the_decoders_search_trains_one_seed_a_call_at_bellm_fixeds_flags(grow, tmp_path):
    rc, calls = grow("bellm-rung", "simcse", 800, "3e-5", script=CURVE)
    assert rc == 0 and [flags(c)["--seeds"] for c in calls] == ["13", "14", "15"]  # each seed's CSV on its own
    assert [flags(c)["--table-out"] for c in calls] == [
        f"{tmp_path}/results/anchors_1200_bellm_fixed_simcse_800steps_1200_seed{s}.csv" for s in (13, 14, 15)]
    rc, calls = grow("bellm-fixed", script=CURVE)
    fixed, rung = flags(calls[3]), flags(calls[0])  # bellm-fixed's first call: its flags but data and budget
    assert {**fixed, "--data": "simcse", "--steps": "800", "--seeds": "13", "--table-out": rung["--table-out"]} == rung
    # The labeled pairs as bellm-fixed trains them; an lr other than 3e-5 is in the name; sizes and seeds as given.
    rc, calls = grow("bellm-rung", "pairs", 200, "1e-4", 800, 14, script=CURVE)
    pairs = flags(calls[-1])
    assert rc == 0 and (pairs["--data"], pairs["--regression-loss"], pairs["--lr"]) == (
        "triples+pairs:label", "cosent", "1e-4")
    assert (pairs["--sizes"], pairs["--seeds"]) == ("800", "14")
    assert pairs["--table-out"] == f"{tmp_path}/results/anchors_1200_bellm_fixed_pairs_200steps_lr1e-4_800_seed14.csv"
    for bad in (("simcse-paper", 100, "3e-5"), ("simcse", "1e2", "3e-5"), ("simcse", 100, "fast"),
                ("simcse", 100, "0e-5"), ("simcse", 100, "3e-5", 1200, "13,x"), ("simcse", 100, "3e-5", 1200, "13,13")):
        rc, after = grow("bellm-rung", *bad, script=CURVE)
        assert rc == 2 and after == calls  # refused before anything trains
