"""The project's exception tree and the one way field paths are spelled.

Every error a person reads names where the problem is, in the YAML spelling of the document
(`spec.categories[1].options.workloadMetadata.labels["nvcre.nvidia.com/x"]`), so the same path can be pasted
into `yq` or found by eye. Raw pydantic or API-client text never reaches a user: the loader and the CLI turn
them into these types.

    NvcreError
    ├── InvalidDocumentError   one or more FieldErrors in an input document (exit code 1)
    ├── CatalogError           a catalog entry is missing or malformed (exit code 1)
    ├── CompileError           a valid Certification that cannot be compiled (exit code 1)
    ├── KubeConfigError        no usable kubeconfig (nvcre_argo.kube.errors; exit code 1)
    └── UnreachableError       the API server does not answer (nvcre_argo.kube.errors; exit code 1)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace


class MapKey(str):
    """A path element that is a key of a user map (printed as `["key"]`, not `.key`)."""

    __slots__ = ()


PathElement = str | int | MapKey
Path = tuple[PathElement, ...]


def format_path(path: Sequence[PathElement]) -> str:
    """Spell a path the way Kubernetes prints it: dots for fields, brackets for indices and map keys."""
    text = ""
    for element in path:
        if isinstance(element, MapKey):
            text += f"[{json.dumps(str(element))}]"
        elif isinstance(element, int):
            text += f"[{element}]"
        else:
            text += f".{element}" if text else element
    return text or "<document>"


@dataclass(frozen=True)
class FieldError:
    """One problem at one place in a document.

    `kind` is a short stable word (`minimum`, `pattern`, `unknown-field`, `rule`, ...) that tests assert on,
    so the message wording can improve without breaking them. `source` names the file (and document).
    """

    path: Path
    kind: str
    message: str
    source: str = ""

    def render(self) -> str:
        located = f"{format_path(self.path)}: {self.message}"
        return f"{self.source}: {located}" if self.source else located

    def at(self, source: str) -> FieldError:
        return replace(self, source=source)


class NvcreError(Exception):
    """Base of every error the project raises on purpose."""


class DocumentError(NvcreError):
    """Problems found in one or more documents; `errors` lists every one of them in document order."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(error.render() for error in self.errors)

    def kinds(self) -> set[tuple[str, str]]:
        """The `(path, kind)` pairs, the stable part that tests compare."""
        return {(format_path(error.path), error.kind) for error in self.errors}


class InvalidDocumentError(DocumentError):
    """A document broke one or more rules of the Certification API."""


class CompileError(DocumentError):
    """A valid Certification that cannot be turned into workflows (unknown category, label conflict, ...)."""


class CatalogError(NvcreError):
    """A catalog entry could not be found or read."""
