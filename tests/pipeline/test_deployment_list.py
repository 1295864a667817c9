"""One list of deployments (prefect.yaml) that `stsgen serve` serves as well, whose parameters every flow takes; a
README and a launcher help whose commands and deployment names exist. No server: the flows are imported and inspected."""

from __future__ import annotations

import argparse
import inspect
import re

from flows.cli import build_parser
from flows.serve import deployment_specs, load_flow
from tests.conftest import PROJECT

SHELL_COMMANDS = {"setup", "test", "help"}  # handled by the ./stsgen script itself, before the Python CLI


# The deployments the README and docs/architecture.md promise users, written here independently of prefect.yaml:
# a deployment dropped from (or renamed in) prefect.yaml fails the tests below.
PROMISED = {"generate-sts-triples/adhoc", "generate-sts-triples/nightly", "retrieve-contexts/retrieve-adhoc",
            "label-pairs/label-adhoc", "sts-pipeline/pipeline-adhoc", "sts-pipeline/pipeline-nightly",
            "prepare-corpus/corpus-weekly", "train-surrogate/train-adhoc", "build-dataset/build-adhoc",
            "train-on-dataset/weekly"}


def test_serve_serves_exactly_the_promised_deployments(monkeypatch):
    import flows.serve

    served, paused = [], []
    monkeypatch.setattr(flows.serve, "prefect_serve", lambda *deployments, **_: served.extend(deployments))
    monkeypatch.setattr(flows.serve, "pause_served", paused.extend)  # no server here: tests/pipeline/test_serve_shutdown.py
    flows.serve.serve()  # what `stsgen serve` runs, with Prefect's blocking serve loop replaced by a recorder
    assert {f"{d.flow_name}/{d.name}" for d in served} == PROMISED and len(served) == len(PROMISED)
    assert set(paused) == PROMISED  # on the way out, what it served
    specs = deployment_specs()
    assert [(d.flow_name, d.name) for d in served] == [(load_flow(s["entrypoint"]).name, s["name"]) for s in specs]
    for spec, deployment in zip(specs, served):
        assert deployment.parameters == (spec.get("parameters") or {})
        assert [s.schedule.cron for s in deployment.schedules] == [s["cron"] for s in spec.get("schedules") or []]


def test_every_deployment_parameter_is_a_parameter_of_its_flow():
    for spec in deployment_specs():
        flow = load_flow(spec["entrypoint"])
        accepted = set(inspect.signature(flow.fn).parameters)
        unknown = set(spec.get("parameters") or {}) - accepted
        assert not unknown, f"{spec['name']}: {flow.name} takes no {', '.join(sorted(unknown))}"


def test_the_readme_names_only_deployments_and_commands_that_exist():
    readme = (PROJECT / "README.md").read_text()
    deployments = {f"{load_flow(s['entrypoint']).name}/{s['name']}" for s in deployment_specs()}
    flows = {d.split("/")[0] for d in deployments}
    named = {m for m in re.findall(r"`([a-z-]+/[a-z-]+)`", readme) if m.split("/")[0] in flows}
    named |= set(re.findall(r"deployment run '([a-z-]+/[a-z-]+)'", readme))
    assert named and not named - deployments, f"README names deployments prefect.yaml lacks: {named - deployments}"
    short = {f"/{d.split('/')[1]}" for d in deployments}  # "`/nightly`" after its flow's full name
    assert set(re.findall(r"`(/[a-z-]+)`", readme)) - {"/"} <= short
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    commands = set(re.findall(r"\./stsgen ([a-z][a-z-]*)", readme))
    assert commands and not commands - set(sub.choices) - SHELL_COMMANDS, commands - set(sub.choices) - SHELL_COMMANDS



def test_the_launcher_help_lists_every_command():
    import subprocess

    text = subprocess.run([str(PROJECT / "stsgen"), "help"], capture_output=True, text=True, check=True).stdout
    listed = set(re.findall(r"^\s+\./stsgen ([a-z-]+)", text, re.M))
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert listed == set(sub.choices) | {"setup", "test"}, listed ^ (set(sub.choices) | {"setup", "test"})
    assert "set -euo" not in text and "generate-sts-triples on the default corpus" not in text
