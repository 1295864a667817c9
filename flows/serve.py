"""One-process alternative to the worker stack: serve the deployments from this process (needs PREFECT_API_URL
pointing at a Prefect server, e.g. `./stsgen ui` in another shell). Same names and schedule as prefect.yaml."""

from __future__ import annotations

from prefect import serve as prefect_serve

from flows.build_dataset import build_dataset
from flows.generate_sts_triples import generate_sts_triples
from flows.label_pairs import label_pairs
from flows.retrieve_contexts import retrieve_contexts
from flows.sts_pipeline import sts_pipeline
from flows.train_on_dataset import train_on_dataset
from flows.train_surrogate import train_surrogate


def serve() -> None:
    prefect_serve(
        generate_sts_triples.to_deployment(name="adhoc-served", parameters={"n": 20, "run": "auto"}),
        generate_sts_triples.to_deployment(name="nightly-served", cron="0 2 * * *", parameters={
            "n": 200, "run": "auto", "avoid_used_sources": True}),
        retrieve_contexts.to_deployment(name="retrieve-adhoc-served", parameters={
            "sentences": "data/outputs/latest/generate-sts-triples/triples.parquet", "run": "auto"}),
        label_pairs.to_deployment(name="label-adhoc-served", parameters={
            "triples": "data/outputs/latest/generate-sts-triples/triples.parquet",
            "contexts": "data/outputs/latest/retrieve-contexts/contexts.parquet", "run": "auto"}),
        train_surrogate.to_deployment(name="train-adhoc-served", parameters={
            "triples": "data/outputs/latest/generate-sts-triples/triples.parquet", "run": "auto"}),
        sts_pipeline.to_deployment(name="pipeline-adhoc-served", parameters={"n": 30, "run": "auto"}),
        sts_pipeline.to_deployment(name="pipeline-nightly-served", cron="0 3 * * *", parameters={
            "n": 200, "run": "auto", "avoid_used_sources": True}),
        build_dataset.to_deployment(name="build-adhoc-served", parameters={
            "runs_dir": "data/outputs", "output_dir": "data/datasets"}),
        train_on_dataset.to_deployment(name="weekly-served", cron="0 4 * * 0", parameters={
            "runs_dir": "data/outputs", "datasets_dir": "data/datasets", "output_dir": "data/trained"}),
    )


if __name__ == "__main__":
    serve()
