"""The package version has one definition, `nvcre_argo.__version__`, which the packaging reads.

Why it matters: the compiler stamps the version on every Workflow and pins the step image to it; a second
copy in pyproject.toml could drift and ship an image tag that does not match the installed code.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import nvcre_argo
from nvcre_argo import contract

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_reads_the_version_from_the_package_instead_of_repeating_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "nvcre_argo.__version__"}


def test_the_version_is_a_literal_packaging_can_read_without_importing_the_package() -> None:
    tree = ast.parse((ROOT / "nvcre_argo" / "__init__.py").read_text(encoding="utf-8"))
    literals = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(target, "id", None) for target in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert literals == [nvcre_argo.__version__]


def test_the_default_step_image_is_pinned_to_that_version() -> None:
    assert f"nvcre-argo:{nvcre_argo.__version__}" == contract.DEFAULT_STEP_IMAGE
