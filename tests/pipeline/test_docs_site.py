"""The documentation: the mkdocs site builds with `--strict` (every page in the nav, no broken link, no warning), the
README stays a short user's guide, the pages speak of the papers by name, and the CLI reference lists every command
and flag the CLI has."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.conftest import PROJECT

README_MAX_LINES = 150


class _ConfigLoader(yaml.SafeLoader):
    """mkdocs.yml with its `!!python/name:` tags (the mermaid fence's formatter) read as plain strings."""


_ConfigLoader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)


def site_pages() -> list:
    """The Markdown files the site is built from: docs/ less what mkdocs.yml's exclude_docs leaves out."""
    config = yaml.load((PROJECT / "mkdocs.yml").read_text(), Loader=_ConfigLoader)
    excluded = {p.lstrip("/") for p in (config.get("exclude_docs") or "").split()}  # names under docs/
    docs = PROJECT / config.get("docs_dir", "docs")
    return sorted(p for p in docs.rglob("*.md") if p.relative_to(docs).as_posix() not in excluded)


def test_the_site_builds_strict_without_warnings(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs-material is not installed (it is in the `test` extra: pip install -e '.[test]')")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(PROJECT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          cwd=PROJECT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # Material's end-of-life banner
    warnings = [line for line in done.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert done.returncode == 0 and not warnings, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "concepts" / "generate" / "index.html").is_file()


def test_the_readme_is_a_short_users_guide():
    readme = (PROJECT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    for command in ("./stsgen run", "./stsgen test"):  # the two commands; CI runs the README's test command
        assert f"\n{command} " in readme or f"\n{command}\n" in readme, command
    for paper in ("arxiv.org/abs/2309.06453", "arxiv.org/abs/2105.07623", "arxiv.org/abs/2311.05296"):
        assert paper in readme, paper


def test_readme_and_docs_name_the_papers_not_seed_ids():
    offenders = []
    for path in [PROJECT / "README.md", *site_pages()]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"seeds? 00\d", line, re.IGNORECASE):
                offenders.append(f"{path.relative_to(PROJECT)}:{number}: {line.strip()[:100]}")
    assert offenders == [], "say NGCSE, Sun et al. 2022 or BeLLM (docs/references.md):\n" + "\n".join(offenders)


def test_the_cli_reference_lists_every_command_and_flag():
    from flows.cli import build_parser

    text = (PROJECT / "docs" / "cli.md").read_text()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, parser in sub.choices.items():
        if f"`{name}`" not in text:
            missing.append(name)
        flags = {flag for action in parser._actions for flag in action.option_strings
                 if flag.startswith("--") and flag != "--help"}
        missing += [f"{name} {flag}" for flag in sorted(flags)
                    if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)]
    for shell_command in ("setup", "test"):  # handled by the ./stsgen launcher before the Python CLI
        if f"`{shell_command}`" not in text:
            missing.append(shell_command)
    assert missing == [], "docs/cli.md lacks: " + ", ".join(missing)
