"""A user's own corpus files → documents: a Parquet / JSONL file with one document (or sentence) per row in
`text_field` (optional `doc_id` column); a `.txt` file (one document; paragraphs separated by blank lines), a `.cor`
file (one document per line), a Brown-style POS-tagged file (detokenized), or a MediaWiki XML dump (`.xml`,
`.xml.bz2`, `*-shortened.bz2`); a folder or `.zip` of text files, one document per file.
Text is decoded as UTF-8; files that are not valid UTF-8 are decoded as Latin-1 and counted in `stats`.
Rows with no usable text are kept in `rejected` with their reason.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Iterator

import pyarrow.parquet as pq

from tasks.core.config import ConfigError, CorpusSettings
from tasks.corpus.readers import Document, wiki_documents


def _decode(data: bytes, stats: dict) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        stats["latin1_fallback_files"] = stats.get("latin1_fallback_files", 0) + 1
        return data.decode("latin-1")


def _read_limited(path: Path, settings: CorpusSettings) -> bytes:
    size = path.stat().st_size
    if size > settings.max_file_bytes:
        raise ConfigError(
            f"Corpus file {path} is {size} bytes, above corpus.max_file_bytes={settings.max_file_bytes}; "
            "split it or raise the limit."
        )
    return path.read_bytes()


def _table_documents(path: Path, settings: CorpusSettings, rejected: list[dict]) -> Iterator[Document]:
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except Exception as exc:
            raise ConfigError(f"Corpus file {path} is not readable Parquet ({type(exc).__name__}: {exc}).") from None
        if settings.text_field not in table.column_names:
            raise ConfigError(
                f"Corpus file {path} has no column '{settings.text_field}' (columns: {', '.join(table.column_names)}); "
                "pass corpus.text_field."
            )
        rows = table.to_pylist()
    else:
        rows = []
        text = _decode(_read_limited(path, settings), {})
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"Corpus file {path}, line {lineno}: not valid JSON ({exc.msg}); fix that line.")
        if rows and not any(isinstance(r, dict) and settings.text_field in r for r in rows):
            raise ConfigError(f"Corpus file {path}: no row has the key '{settings.text_field}'; pass corpus.text_field.")
    for i, row in enumerate(rows):
        value = row.get(settings.text_field) if isinstance(row, dict) else None
        if not isinstance(value, str) or not value.strip():
            rejected.append({"stage": "input", "source_id": f"{path.name}:{i + 1}", "reason": "no_text",
                             "detail": f"row {i + 1}: '{settings.text_field}' is {type(value).__name__} / empty"})
            continue
        doc_id = str(row.get("doc_id", i)) if isinstance(row, dict) else str(i)
        yield Document(f"{path.name}#{doc_id}", value, path.name)


_TAGGED = re.compile(r"^[^\s/]+(?:/[^\s/]+)*/[a-z$*+\-.,:()'`]+$")
_SKIP_FILES = ("readme", "contents", "cats.txt", "license")


def is_pos_tagged(text: str) -> bool:
    """Brown-style `word/tag` tokens (checked on the first 300 tokens)."""
    tokens = text.split()[:300]
    return len(tokens) >= 20 and sum(bool(_TAGGED.match(t)) for t in tokens) / len(tokens) > 0.9


_DETOK_NO_SPACE_BEFORE = re.compile(r" ([,.;:!?%)\]}]|'s|'re|'ve|'ll|'d|n't|'m)")
_DETOK_NO_SPACE_AFTER = re.compile(r"([(\[{$]) ")


def detokenize_tagged_line(line: str) -> str:
    """`The/at jury/nn said/vbd ``/`` no/at ''/''` → `The jury said "no"` (tags dropped, PTB quotes restored)."""
    words = [t.rsplit("/", 1)[0] for t in line.split()]
    text = " ".join(words)
    text = re.sub(r"``\s*", '"', text)
    text = re.sub(r"\s*''", '"', text)
    text = _DETOK_NO_SPACE_BEFORE.sub(r"\1", text)
    return _DETOK_NO_SPACE_AFTER.sub(r"\1", text).strip()


def _text_documents(name: str, data: bytes, stats: dict, settings: CorpusSettings) -> Iterator[Document]:
    text = _decode(data, stats)
    if name.endswith(".cor"):
        for i, line in enumerate(text.splitlines()):
            if line.strip():
                yield Document(f"{name}#{i}", line, name)
        return
    if is_pos_tagged(text):  # Brown: one tagged sentence per line, paragraphs by blank lines
        stats["pos_tagged_files"] = stats.get("pos_tagged_files", 0) + 1
        lines = [detokenize_tagged_line(ln) if ln.strip() else "" for ln in text.splitlines()]
        yield Document(name, "\n".join(lines), name, presplit=True)
        return
    blocks = [text] if settings.document_split == "file" else [b for b in re.split(r"\n\s*\n", text) if b.strip()]
    for i, block in enumerate(blocks):
        doc_id = name if settings.document_split == "file" else f"{name}#{i}"
        yield Document(doc_id, block, name, presplit=settings.sentence_per_line)


def iter_documents(source: str, settings: CorpusSettings, rejected: list[dict], stats: dict) -> Iterator[Document]:
    path = Path(source)
    if not path.exists():
        raise ConfigError(f"Corpus source {path} does not exist; pass a file, folder or zip (or 'default').")
    name = path.name.lower()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        for p in files:
            if p.name.lower().startswith(_SKIP_FILES):
                continue
            yield from _text_documents(str(p.relative_to(path)), _read_limited(p, settings), stats, settings)
    elif name.endswith(".zip"):
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise ConfigError(f"Corpus file {path} is not a valid zip archive.") from None
        with archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                base = info.filename.rsplit("/", 1)[-1]
                if info.is_dir() or base.startswith(".") or base.lower().startswith(_SKIP_FILES):
                    continue
                if info.file_size > settings.max_file_bytes:
                    raise ConfigError(f"{path}:{info.filename} is larger than corpus.max_file_bytes.")
                yield from _text_documents(info.filename, archive.read(info), stats, settings)
    elif ".xml" in name or name.endswith("-shortened.bz2"):
        yield from wiki_documents(path, stats)
    elif name.endswith((".parquet", ".jsonl", ".json")):
        yield from _table_documents(path, settings, rejected)
    else:
        yield from _text_documents(path.name, _read_limited(path, settings), stats, settings)
