"""One-process alternative to the worker stack: serve the deployments from this process (needs PREFECT_API_URL
pointing at a Prefect server, e.g. `./stsgen ui` in another shell). Same names and schedule as prefect.yaml."""

from __future__ import annotations

from prefect import serve as prefect_serve

from flows.generate_sts_triples import generate_sts_triples


def serve() -> None:
    prefect_serve(
        generate_sts_triples.to_deployment(name="adhoc-served", parameters={"n": 20}),
        generate_sts_triples.to_deployment(name="nightly-served", cron="0 2 * * *", parameters={"n": 200}),
    )


if __name__ == "__main__":
    serve()
