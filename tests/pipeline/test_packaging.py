"""The wheel of the project, built offline and used without the repository on sys.path: every module of flows, tasks,
models and prompts is in it and imports, the prompt templates are in it, and the `stsgen` console script works."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
PACKAGES = ("flows", "tasks", "models", "prompts")


def source_modules() -> set[str]:
    """Dotted names of every module and package under the four packages in the checkout."""
    names = set()
    for pkg in PACKAGES:
        for path in (PROJECT / pkg).rglob("*.py"):
            parts = path.relative_to(PROJECT).with_suffix("").parts
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of what a source distribution holds (pyproject, README, the packages), so neither the
    checkout's build/ folder (stale files from earlier builds) nor its egg-info can leak into the wheel. Offline:
    no build isolation (setuptools and wheel come from .venv), no index."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(PROJECT / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(PROJECT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "-q", "-w", str(root / "dist")],
                   check=True, cwd=root, capture_output=True, text=True, timeout=300)
    (built,) = (root / "dist").glob("stsgen-*.whl")
    return built


@pytest.fixture(scope="module")
def site(wheel) -> Path:
    """The wheel unpacked: what `pip install --no-deps --target` lays out (a wheel is a zip of its install tree)."""
    target = wheel.parent.parent / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    return target


def run_isolated(site: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    """.venv's Python (the dependencies) with the unpacked wheel first on sys.path, started outside the checkout.
    .venv's editable install of the project stays behind it (its finder is appended to sys.meta_path), and the child
    checks where every module came from."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=site.parent, env=env, capture_output=True,
                          text=True, timeout=300)


def test_wheel_holds_every_module_the_templates_and_the_console_script(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser()
        parser.read_string(zf.read(entry_points).decode())
    modules = {n.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for n in names if n.endswith(".py")}
    assert modules == source_modules()
    templates = {p.relative_to(PROJECT).as_posix() for p in (PROJECT / "prompts" / "templates").glob("*.j2")}
    assert templates and templates <= names
    assert parser["console_scripts"]["stsgen"] == "flows.cli:main"
    assert not any(n.startswith(("tests/", "benchmarks/", "data/")) for n in names)


CHILD = """
import importlib, importlib.metadata, importlib.resources, json, pkgutil, sys
from pathlib import Path

site, project = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
assert not any(Path(p or ".").resolve() == project for p in sys.path), f"{project} is on sys.path"

def from_wheel(module):
    path = Path(module.__file__).resolve()
    assert path.is_relative_to(site), f"{module.__name__} imported from {path}, not the wheel"

def fail(name):
    raise ImportError(f"walk_packages could not import {name}")

imported = []
for pkg in sys.argv[3:]:
    package = importlib.import_module(pkg)
    from_wheel(package)
    imported.append(pkg)
    for info in pkgutil.walk_packages(package.__path__, pkg + ".", onerror=fail):
        from_wheel(importlib.import_module(info.name))
        imported.append(info.name)
templates = sorted(p.name for p in importlib.resources.files("prompts").joinpath("templates").iterdir()
                   if p.name.endswith(".j2"))
script = importlib.metadata.entry_points(group="console_scripts", name="stsgen")
(main,) = [ep.load() for ep in script]
from_wheel(sys.modules[main.__module__])
print(json.dumps({"modules": imported, "templates": templates}))
"""


def test_every_module_imports_from_the_wheel(site):
    done = run_isolated(site, CHILD, str(site), str(PROJECT), *PACKAGES)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(report["modules"]) == source_modules()
    assert report["templates"] == sorted(p.name for p in (PROJECT / "prompts" / "templates").glob("*.j2"))


def test_cli_help_from_the_wheel(site):
    done = run_isolated(site, "from flows.cli import main; raise SystemExit(main(['--help']))")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("usage: stsgen") and "generate" in done.stdout
