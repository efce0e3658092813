"""The only YAML reader and writer in the project.

Why one module: Hera registers a global PyYAML `str` representer on import, so any `yaml.dump` elsewhere
would change its bytes depending on what happened to be imported first. Here the writer uses its own Dumper
class with its own representers, and the reader reports syntax errors with the line and column, so output is
byte-stable and input errors are readable.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

# libyaml's emitter when PyYAML was built with it (about 7x faster on large Workflows), else the pure-Python
# one; both emit the same bytes for the documents we write, and the representers are ours either way.
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """A private dumper: representers registered here never leak into, or in from, PyYAML's globals."""

    def ignore_aliases(self, data: Any) -> bool:
        # Shared Python objects must be written out in full; anchors in generated manifests confuse readers.
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _represent_mapping(dumper: yaml.SafeDumper, value: Mapping[Any, Any]) -> yaml.MappingNode:
    return dumper.represent_mapping("tag:yaml.org,2002:map", value.items())


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(dict, _represent_mapping)


def dump_yaml(document: Any) -> str:
    """One document as YAML, keys in the order given (callers sort user maps), multiline strings as blocks."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)


def dump_yaml_documents(documents: Sequence[Any]) -> str:
    """Several documents separated by `---`."""
    return "".join(f"---\n{dump_yaml(document)}" for document in documents)


@dataclass(frozen=True)
class YamlSyntaxError(Exception):
    """A document that is not YAML; `line` and `column` are 1-based."""

    line: int | None
    column: int | None
    problem: str

    def __str__(self) -> str:
        where = f"line {self.line}, column {self.column}: " if self.line is not None else ""
        return f"{where}{self.problem}"


class _Loader(yaml.SafeLoader):
    """A private loader so nothing registered globally changes how documents are read."""


def load_yaml_documents(text: str) -> Iterator[Any]:
    """Every document in a YAML stream; raises YamlSyntaxError naming the line on bad syntax."""
    try:
        yield from yaml.load_all(text, Loader=_Loader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        problem = error.problem or str(error)
        if error.context:
            problem = f"{error.context}, {problem}"
        raise YamlSyntaxError(mark.line + 1 if mark else None, mark.column + 1 if mark else None, problem) from None
    except yaml.YAMLError as error:
        raise YamlSyntaxError(None, None, str(error)) from None
    except RecursionError:
        raise YamlSyntaxError(None, None, "nesting is too deep") from None


def load_yaml_mapping(text: str, what: str) -> dict[str, Any]:
    """The one mapping a YAML text holds (a manifest); ValueError naming `what` otherwise."""
    documents = list(load_yaml_documents(text))
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise ValueError(f"{what} is not one YAML mapping")
    mapping: dict[str, Any] = documents[0]
    return mapping
