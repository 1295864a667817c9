"""One-process alternative to the worker stack: serve the deployments from this process (needs PREFECT_API_URL
pointing at a Prefect server, e.g. `./stsgen ui` in another shell).

prefect.yaml is the one list of deployments: this module reads it and serves the same names, entrypoints,
parameters and schedules (a deployment added there is served here too)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import yaml
from prefect import serve as prefect_serve
from prefect.client.orchestration import get_client
from prefect.client.schemas.schedules import CronSchedule
from prefect.exceptions import ObjectNotFound

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


def pause_served(full_names: list[str]) -> None:
    """Pause the served deployments (no runner is left to run them: paused, their schedules pile up no late runs);
    one quick try where the Prefect server does not answer, and a deployment never registered is skipped."""
    with get_client(sync_client=True) as client:  # a fresh client: no retries of a refused connection
        unreachable = client.api_healthcheck()
        if unreachable is not None:
            print(f"stsgen serve: the Prefect server at {client.api_url} does not answer "
                  f"({type(unreachable).__name__}); {', '.join(full_names)} stay active there: pause them in its UI "
                  "once it is back, or serve again.", file=sys.stderr)
            return
        paused = []
        for name in full_names:
            try:
                client.pause_deployment(client.read_deployment_by_name(name).id)
                paused.append(name)
            except ObjectNotFound:
                pass
    print(f"stsgen serve: stopped; paused {', '.join(paused) or 'nothing (none registered)'}", file=sys.stderr)


def serve() -> None:
    deployments = runner_deployments()
    try:
        # Not Prefect's own pause on shutdown: where the server is already gone, its client retries each pause for
        # a minute (a reconnect backoff) and ends in a traceback.
        prefect_serve(*deployments, pause_on_shutdown=False)
    finally:
        pause_served([d.full_name for d in deployments])


if __name__ == "__main__":
    serve()
