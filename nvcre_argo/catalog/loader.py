"""Load the catalog: the built-in entries shipped in the package, then any `--catalog DIR` on top.

A directory holds `<domain>/<variant>.yaml` files and an optional `_lib/` of shared fragments that entries
name with `extends: <fragment>` (looked up in the same directory first, then in the built-in `_lib/`). An entry
is the fragment chain deep-merged (mappings merge, lists and scalars replace), then validated strictly; a
later directory's entry replaces an earlier one with the same domain/variant. Every problem names its file.
An optional `_platform/` holds platform arms, which `nvcre_argo.platform.arms` reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nvcre_argo.catalog.model import CatalogEntry
from nvcre_argo.catalog.placeholders import KNOWN_PLACEHOLDERS, find_placeholders
from nvcre_argo.errors import CatalogError, format_path
from nvcre_argo.messages import describe_pydantic_error
from nvcre_argo.yamlio import YamlSyntaxError, load_yaml_documents

LIB_DIR = "_lib"
MAX_EXTENDS_DEPTH = 8


@dataclass(frozen=True)
class Catalog:
    """Entries by `domain/variant`, and the file each came from (for messages)."""

    entries: Mapping[str, CatalogEntry]
    sources: Mapping[str, str]

    def find(self, domain: str, variant: str) -> CatalogEntry | None:
        return self.entries.get(f"{domain}/{variant}")

    def names(self) -> list[str]:
        return sorted(self.entries)


def builtin_entries_dir() -> Traversable:
    return resources.files("nvcre_argo.catalog") / "entries"


def load_catalog(extra_dirs: Sequence[Path] = ()) -> Catalog:
    """The built-in catalog with each extra directory layered on top, in order."""
    builtin = builtin_entries_dir()
    entries: dict[str, CatalogEntry] = {}
    sources: dict[str, str] = {}
    for directory in (builtin, *extra_dirs):
        if isinstance(directory, Path) and not directory.is_dir():
            raise CatalogError(f"{directory}: catalog directory does not exist")
        for source, entry in _load_directory(directory, builtin):
            entries[entry.key] = entry
            sources[entry.key] = source
    return Catalog(dict(sorted(entries.items())), dict(sorted(sources.items())))


def _load_directory(directory: Traversable, builtin: Traversable) -> list[tuple[str, CatalogEntry]]:
    loaded = []
    for domain_dir in sorted(directory.iterdir(), key=lambda item: item.name):
        # `_lib/` (fragments), `_platform/` (platform arms, nvcre_argo.platform.arms): a domain is a DNS label,
        # so no domain directory starts with `_`.
        if not domain_dir.is_dir() or domain_dir.name.startswith(("_", ".")):
            continue
        for file in sorted(domain_dir.iterdir(), key=lambda item: item.name):
            if file.name.endswith((".yaml", ".yml")):
                source = _describe_source(file, domain_dir.name, directory, builtin)
                loaded.append((source, _load_entry(file, source, domain_dir.name, [directory, builtin])))
    return loaded


def _describe_source(file: Traversable, domain: str, directory: Traversable, builtin: Traversable) -> str:
    if directory is builtin:
        return f"<built-in catalog>/{domain}/{file.name}"
    return str(file)


def _read_mapping(file: Traversable, source: str) -> dict[str, Any]:
    try:
        documents = [document for document in load_yaml_documents(file.read_text(encoding="utf-8")) if document]
    except YamlSyntaxError as error:
        raise CatalogError(f"{source}: invalid YAML: {error}") from None
    except OSError as error:
        raise CatalogError(f"{source}: cannot read: {error}") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise CatalogError(f"{source}: a catalog file must hold exactly one mapping")
    return documents[0]


def _find_fragment(name: str, search: Sequence[Traversable], source: str) -> tuple[Traversable, str]:
    for directory in search:
        candidate = directory / LIB_DIR / f"{name}.yaml"
        if candidate.is_file():
            return candidate, f"{source} -> {LIB_DIR}/{name}.yaml"
    raise CatalogError(f'{source}: extends: no fragment "{name}" in {LIB_DIR}/')


def _expand(raw: dict[str, Any], search: Sequence[Traversable], source: str, depth: int = 0) -> dict[str, Any]:
    """Resolve the `extends` chain: the fragment underneath, this file's keys on top."""
    name = raw.pop("extends", None)
    if name is None:
        return raw
    if depth >= MAX_EXTENDS_DEPTH:
        raise CatalogError(f"{source}: extends: chain deeper than {MAX_EXTENDS_DEPTH} (a cycle?)")
    if not isinstance(name, str):
        raise CatalogError(f"{source}: extends: must be a fragment name")
    fragment_file, fragment_source = _find_fragment(name, search, source)
    base = _expand(_read_mapping(fragment_file, fragment_source), search, fragment_source, depth + 1)
    return deep_merge(base, raw)


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; anything else in `top` replaces what `base` had."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _load_entry(file: Traversable, source: str, domain_dir: str, search: Sequence[Traversable]) -> CatalogEntry:
    raw = _expand(_read_mapping(file, source), search, source)
    try:
        entry = CatalogEntry.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{format_path(tuple(detail['loc']))}: {describe_pydantic_error(detail, {})[1]}"
            for detail in error.errors(include_url=False)
        )
        raise CatalogError(f"{source}: {problems}") from None
    expected = f"{domain_dir}/{file.name.rsplit('.', 1)[0]}"
    if entry.key != expected:
        raise CatalogError(f"{source}: domain/variant {entry.key} does not match its path {expected}")
    for template_name, template in (("runtime", entry.runtime), ("trainer", entry.trainer)):
        for path, name in find_placeholders(template, (template_name,)):
            if name not in KNOWN_PLACEHOLDERS:
                known = ", ".join(sorted(KNOWN_PLACEHOLDERS))
                raise CatalogError(f"{source}: {format_path(path)}: unknown placeholder %{{{name}}}; known: {known}")
    return entry
