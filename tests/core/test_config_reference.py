"""docs/configuration.md is the reference generated from the settings classes: the committed file must be what
`render(reference_sections())` writes today, every field has a description, and a renamed field makes the check fail."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pydantic import create_model

from flows.cli.reference import sections as reference_sections
from tasks.core.config_reference import COMMAND, missing_descriptions, render
from tasks.generate.settings import GenerateSettings, SamplingSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def stale_lines(rendered: str, committed: str) -> list[str]:
    """The lines of one that the other lacks, each marked with where it is missing from ('-' committed only)."""
    now, then = rendered.splitlines(), committed.splitlines()
    return [f"- {line}" for line in then if line not in now] + [f"+ {line}" for line in now if line not in then]


def test_committed_reference_is_current():
    diff = stale_lines(render(reference_sections()), DOC.read_text())
    assert not diff, (f"docs/configuration.md is stale: run `{COMMAND}` (or `.venv/bin/python -m flows.cli "
                      "config-reference --write docs/configuration.md`) and commit it. Differences:\n"
                      + "\n".join(diff[:20]))


def test_every_field_has_a_description():
    missing = missing_descriptions(reference_sections())
    assert not missing, "settings fields without a description (Field(..., description=...)): " + ", ".join(missing)


def test_descriptions_are_one_line_without_history():
    """A description says what the field does and why its default in one line; measurement history (issues,
    dates, runs) belongs in docs/results.md."""
    history = re.compile(r"\bissue \d+|\b20\d\d-\d\d-\d\d\b|\bsample [AB]\b", re.IGNORECASE)
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `")]
    assert rows and not [r for r in rows if history.search(r)]


def test_a_renamed_field_makes_the_reference_stale():
    """The check has teeth: GenerateSettings with sampling.candidates renamed renders a reference that differs from
    the committed one in exactly that field's row."""
    fields = {("n_candidates" if name == "candidates" else name): (info.annotation, info)
              for name, info in SamplingSettings.model_fields.items()}
    module = GenerateSettings.__module__  # the section's heading names the class's module
    renamed_sampling = create_model("SamplingSettings", __base__=SamplingSettings.__base__, __module__=module,
                                    **fields)
    renamed = create_model("GenerateSettings", __base__=GenerateSettings, __module__=module,
                           sampling=(renamed_sampling, renamed_sampling()))
    sections = tuple(dataclasses.replace(s, model=renamed) if s.model is GenerateSettings else s
                     for s in reference_sections())
    diff = stale_lines(render(sections), DOC.read_text())
    assert diff and all("generate.sampling." in line for line in diff), diff
    assert any(line.startswith("- | `generate.sampling.candidates`") for line in diff)
    assert any(line.startswith("+ | `generate.sampling.n_candidates`") for line in diff)
