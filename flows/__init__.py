"""Prefect flows (deployment entrypoints), the CLI and the serve entry point. Flows only wire stages."""
