"""The committed Go wrapper modules build what versions.env pins, with every staging module replaced.

k8s.io/kubernetes requires its staging modules at v0.0.0, which the module proxy does not serve; the
wrapper must replace each one with its published version. The list is derived from the Kubernetes go.mod
in the module cache (hack/testbin.sh regen), and this test fails when the committed wrapper drifts from it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.harness.versions import load_versions, module_dir

ROOT = Path(__file__).resolve().parents[2]
TESTBIN = ROOT / "hack" / "testbin"


def _versions() -> dict[str, str]:
    return load_versions(TESTBIN / "versions.env")


def _kubernetes_gomod(version: str) -> str:
    return (module_dir("k8s.io/kubernetes", version) / "go.mod").read_text()


def test_every_staging_module_is_replaced_with_its_published_version() -> None:
    version = _versions()["K8S_VERSION"]
    staging = set(re.findall(r"^\s*(k8s\.io/\S+) => \./staging/", _kubernetes_gomod(version), re.MULTILINE))
    wrapper = (TESTBIN / "k8s" / "go.mod").read_text()
    replaced = dict(re.findall(r"^(?:replace)?\s*(k8s\.io/\S+) => \S+ (v\S+)$", wrapper, re.MULTILINE))

    assert len(staging) >= 30
    assert set(replaced) == staging
    assert set(replaced.values()) == {"v0." + version.removeprefix("v1.")}


def test_the_wrappers_pin_the_versions_in_versions_env() -> None:
    versions = _versions()
    k8s = (TESTBIN / "k8s" / "go.mod").read_text()
    etcd = (TESTBIN / "etcd" / "go.mod").read_text()

    assert f"k8s.io/kubernetes {versions['K8S_VERSION']}" in k8s
    assert f"go.etcd.io/etcd/server/v3 {versions['ETCD_VERSION']}" in etcd
    assert "k8s.io/kubernetes/cmd/kube-apiserver" in k8s
