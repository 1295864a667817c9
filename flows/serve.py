"""One-process alternative to the worker stack: serve the deployments from this process (needs PREFECT_API_URL
pointing at a Prefect server, e.g. `./stsgen ui` in another shell).

prefect.yaml is the one list of deployments: this module reads it and serves the same names, entrypoints,
parameters and schedules (a deployment added there is served here too)."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml
from prefect import serve as prefect_serve
from prefect.client.schemas.schedules import CronSchedule

PREFECT_YAML = Path(__file__).resolve().parents[1] / "prefect.yaml"


def deployment_specs(path: Path = PREFECT_YAML) -> list[dict]:
    """The deployments of prefect.yaml: name, entrypoint, description, parameters, cron schedules."""
    return yaml.safe_load(path.read_text())["deployments"]


def load_flow(entrypoint: str):
    """`flows/x.py:fn` → the flow object (imported as a module of this checkout)."""
    file, name = entrypoint.split(":")
    return getattr(importlib.import_module(file.removesuffix(".py").replace("/", ".")), name)


def runner_deployments(path: Path = PREFECT_YAML) -> list:
    return [load_flow(spec["entrypoint"]).to_deployment(
        name=spec["name"], description=spec.get("description"), parameters=spec.get("parameters") or {},
        schedules=[CronSchedule(cron=s["cron"], timezone=s.get("timezone")) for s in spec.get("schedules") or []]
        or None)
        for spec in deployment_specs(path)]


def serve() -> None:
    prefect_serve(*runner_deployments())


if __name__ == "__main__":
    serve()
