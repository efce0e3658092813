"""The committed Go wrapper modules build what versions.env pins, with every staging module replaced.

k8s.io/kubernetes requires its staging modules at v0.0.0, which the module proxy does not serve; the
wrapper must replace each one with its published version. The list is derived from the Kubernetes go.mod
in the module cache (hack/testbin.sh regen), and this test fails when the committed wrapper drifts from it.
The Argo, Trainer and JobSet wrappers must select exactly the dependency versions their upstream go.mod does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.harness.versions import BinaryDirs, binary_dirs, load_versions, module_dir

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
    assert "k8s.io/kubernetes/cmd/kube-controller-manager" in k8s
    assert "k8s.io/kubernetes/cmd/kube-scheduler" in k8s


# One wrapper per upstream module (so minimal version selection never lifts one tool's dependencies to
# another's): wrapper directory, the module it builds from, the versions.env key of its version, its tools.
TOOL_WRAPPERS = {
    "argo-v3": ("ARGO_V3_MODULE", "ARGO_V3_VERSION", ("/cmd/argoexec", "/cmd/workflow-controller")),
    "argo-v4": ("ARGO_V4_MODULE", "ARGO_V4_VERSION", ("/cmd/argoexec", "/cmd/workflow-controller")),
    "argo-server": ("ARGO_V3_MODULE", "ARGO_V3_VERSION", ("/cmd/argo",)),
    "trainer": ("TRAINER_MODULE", "TRAINER_VERSION", ("/cmd/trainer-controller-manager",)),
    "jobset": ("JOBSET_MODULE", "JOBSET_VERSION", ("",)),
}
REQUIREMENT = re.compile(r"^\s*(?:require\s+)?([^\s()]+)\s+(v\S+)(?:\s+//.*)?$", re.MULTILINE)


def _requirements(gomod: str) -> dict[str, str]:
    return dict(REQUIREMENT.findall(gomod))


def _tools(gomod: str) -> set[str]:
    block = re.search(r"^tool \((.*?)^\)", gomod, re.MULTILINE | re.DOTALL)
    return set(block.group(1).split()) if block else set(re.findall(r"^tool (\S+)$", gomod, re.MULTILINE))


@pytest.mark.parametrize("wrapper", sorted(TOOL_WRAPPERS))
def test_each_tool_wrapper_pins_its_module_and_selects_exactly_what_upstream_selects(wrapper: str) -> None:
    versions = _versions()
    module_key, version_key, packages = TOOL_WRAPPERS[wrapper]
    module, version = versions[module_key], versions[version_key]
    gomod = (TESTBIN / wrapper / "go.mod").read_text()
    required = _requirements(gomod)
    upstream = _requirements((module_dir(module, version) / "go.mod").read_text())

    assert required.pop(module) == version
    assert _tools(gomod) == {module + package for package in packages}
    # The committed go.mod never points at a directory (the patched Argo copy is replaced in a temporary copy).
    assert not re.search(r"=>\s*[./]", gomod)
    lifted = {path: (v, upstream.get(path)) for path, v in required.items() if upstream.get(path) != v}
    assert lifted == {}


def test_the_argo_v3_wrapper_restates_argos_tablewriter_replace() -> None:
    gomod = (TESTBIN / "argo-v3" / "go.mod").read_text()
    assert "replace github.com/olekukonko/tablewriter => github.com/olekukonko/tablewriter v0.0.5" in gomod


def test_print_dir_names_every_binary_directory_by_version() -> None:
    versions = _versions()
    dirs = binary_dirs()

    assert dirs.k8s.name == f"k8s-{versions['K8S_VERSION']}"
    assert dirs.etcd.name == f"etcd-{versions['ETCD_VERSION']}"
    assert dirs.argo_dir("v3").name == f"argo-{versions['ARGO_V3_VERSION']}"
    assert dirs.argo_dir("v4").name == f"argo-{versions['ARGO_V4_VERSION']}"
    assert dirs.trainer.name == f"trainer-{versions['TRAINER_VERSION']}"
    assert dirs.jobset.name == f"jobset-{versions['JOBSET_VERSION']}"
    assert dirs.argolint.parent == dirs.argo_dir("v3")


def test_simulation_needs_more_than_the_control_plane(tmp_path: Path) -> None:
    names = ("k8s", "etcd", "argo", "argo_v4", "trainer", "jobset")
    empty = BinaryDirs(**{name: tmp_path / name for name in names})

    assert empty.missing() == [empty.etcd_binary, empty.kube_apiserver]
    both = empty.missing_for_simulation()
    assert len(both) == 2 + 2 + 2 * 2 + 2  # control plane, kcm + scheduler, two Argo pairs, Trainer, JobSet
    assert empty.workflow_controller("v3") in both
    assert empty.argoexec("v4") in both
    v3_only = empty.missing_for_simulation("v3")
    assert empty.argoexec("v3") in v3_only
    assert empty.workflow_controller("v4") not in v3_only
    with pytest.raises(ValueError, match="v5"):
        empty.argo_dir("v5")
