"""The configuration reference (docs/configuration.md), generated from the settings classes: every field of every
settings object a user passes — sts-pipeline's parameters and the `STSGEN_*` environment — with its dotted path as
the user sets it (`generate.sampling.candidates`), its type, its default and its description.

Pure: `render(sections)` walks each section's settings class and its nested pydantic models and returns Markdown.
The sections (which classes, in what order) are flows/cli/reference.py's `SECTIONS`: shared code imports no stage's
settings. A nested class already written out under another path is
not repeated: its field's row says where its fields are (retrieve.corpora's items are generate.corpus's fields).
`./stsgen config-reference --write docs/configuration.md` regenerates the file; tests/core/test_config_reference.py
fails when it is stale or a field has no description."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo

COMMAND = "./stsgen config-reference --write docs/configuration.md"


@dataclass(frozen=True)
class Section:
    """One settings object as a user passes it: `prefix` is its name (sts-pipeline's parameter), `model` its class;
    `env_prefix` set: the fields are environment variables, named `<env_prefix><PATH_WITH_UNDERSCORES>`."""

    prefix: str
    model: type[BaseModel]
    title: str
    intro: str
    env_prefix: str | None = None


@dataclass(frozen=True)
class FieldDoc:
    path: str
    type: str
    default: str
    description: str | None


def type_name(annotation: Any) -> str:
    """A field's type as the user reads it: `int | None`, `'tfidf' | 'bm25'`, `list[str]`, a class by its name."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin is Annotated:
        return type_name(args[0])
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def nested_model(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """(the settings class a field holds, whether it is held directly) — directly (`sampling: SamplingSettings`),
    optionally (`llm: LLMSettings | None`) or as list items (`corpora: list[CorpusSettings] | None`); None when the
    field holds no settings class."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, True
    for arg in typing.get_args(annotation):
        found = nested_model(arg)
        if found:
            return found[0], False
    return None


def default_text(info: FieldInfo) -> str:
    """The default as a Python value; a factory's default is computed when the settings are made (`from the
    environment` where it reads one): it is named, not called, so the reference is the same on every machine."""
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        name = getattr(info.default_factory, "__name__", "")
        return "from the environment" if name == "<lambda>" else f"{name}()"
    if isinstance(info.default, BaseModel) and info.default == type(info.default)():
        return f"{type(info.default).__name__}()"  # its fields' defaults are listed under its path
    return repr(info.default)


def field_docs(model: type[BaseModel], path: tuple[str, ...], seen: dict[type, str],
               name_of=".".join, defaults: BaseModel | None = None) -> list[FieldDoc]:
    """The rows of `model`'s fields under `path`, nested settings classes expanded (their fields under the field's
    path, an optional or list one's after its own row); a class in `seen` is not expanded again: its row says where
    its fields are. `name_of`: a path's name as the user writes it. `defaults`: the object the field holding `model`
    defaults to, whose values are the defaults where they differ from the class's (TrainSettings.losses: the
    recipe's weights)."""
    rows: list[FieldDoc] = []
    for name, info in model.model_fields.items():
        here, nested = (*path, name), nested_model(info.annotation)
        if nested is None:
            default = getattr(defaults, name) if defaults is not None else info.default
            text = repr(default) if info.default_factory is None and default != info.default else default_text(info)
            rows.append(FieldDoc(name_of(here), type_name(info.annotation), text, info.description))
            continue
        cls, direct = nested
        if cls in seen:
            see = f"Its fields: `{seen[cls]}.*`."
            description = f"{info.description.rstrip('.')}. {see}" if info.description else see
            rows.append(FieldDoc(name_of(here), type_name(info.annotation), default_text(info), description))
            continue
        if not direct:
            rows.append(FieldDoc(name_of(here), type_name(info.annotation), default_text(info), info.description))
        item = (*path, f"{name}[]") if _is_list(info.annotation) else here
        seen[cls] = name_of(item)
        inner = getattr(defaults, name) if defaults is not None else info.default
        rows.extend(field_docs(cls, item, seen, name_of, inner if isinstance(inner, cls) else None))
    return rows


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (list, tuple) or (origin in (Union, types.UnionType)
                                       and any(_is_list(a) for a in typing.get_args(annotation)))


def _env_name(prefix: str, model: type[BaseModel]):
    """A path's environment variable: an alias where the field has one (PREFECT_API_URL), else the prefix and the
    path's names upper-cased and joined by `_` (llm.base_url → STSGEN_LLM_BASE_URL)."""
    def name_of(path: tuple[str, ...]) -> str:
        alias = model.model_fields[path[0]].validation_alias if len(path) == 1 else None
        choices = getattr(alias, "choices", None)
        return str(choices[0]) if choices else prefix + "_".join(path).upper()
    return name_of


def section_docs(section: Section, seen: dict[type, str]) -> list[FieldDoc]:
    """A section's rows (its class entered in `seen` under its prefix)."""
    if section.env_prefix is not None:
        return field_docs(section.model, (), seen, _env_name(section.env_prefix, section.model))
    seen.setdefault(section.model, section.prefix)
    return field_docs(section.model, (section.prefix,), seen)


def missing_descriptions(sections: typing.Sequence[Section]) -> list[str]:
    """The paths of the fields without a description (each one the reference cannot explain)."""
    seen: dict[type, str] = {}
    return [r.path for s in sections for r in section_docs(s, seen) if not r.description]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(sections: typing.Sequence[Section]) -> str:
    """The reference as Markdown: a table per section (path, type, default, description)."""
    out = ["# Configuration reference", "",
           f"Generated from the settings classes by `{COMMAND}`; do not edit by hand (tests/core/"
           "test_config_reference.py fails when it is stale).", "",
           "A path is the setting as sts-pipeline takes it: `generate.sampling.candidates` is the field `candidates` "
           "of the `sampling` object of the flow's `generate` parameter (a Prefect deployment: `-p generate="
           "'{\"sampling\": {\"candidates\": 8}}'`). The stages' own flows take the same object as `settings`. "
           "`[]` marks the fields of a list's items. Defaults are Python values; the CLI's presets "
           "(flows/presets.py) and flags set some of them per command. On the command line, `--set PATH=VALUE` sets any "
           "of them by its path, flag or not (`./stsgen run --set generate.sampling.candidates=8`; a JSON value or a "
           "plain string).", ""]
    seen: dict[type, str] = {}
    for section in sections:
        module = section.model.__module__.replace(".", "/") + ".py"
        out += [f"## {section.title}", "", f"{section.intro} (`{section.model.__name__}`, {module})", "",
                "| Setting | Type | Default | Description |", "|---|---|---|---|"]
        out += [f"| `{_cell(r.path)}` | `{_cell(r.type)}` | `{_cell(r.default)}` | {_cell(r.description or '')} |"
                for r in section_docs(section, seen)]
        out.append("")
    return "\n".join(out)
