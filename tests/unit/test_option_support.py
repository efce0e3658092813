"""Nothing accepted and then ignored (issue 12 item 5): options the API has but nvcre-argo does not implement are
refused at compile time with their field path, and thresholds a category cannot measure never reach it.

Documents go through the functions the commands call (`check_certifications`, `certification_warnings`,
`resolve_certification`), asserting `(path, kind)` pairs; the commands run in-process with click's CliRunner to
show where warnings and errors go. Which options are implemented was checked by reading the code: nothing
outside `api/` reads the refused ones (only the catalog's own defaults mention maxRestarts, and no step reads
it either).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.cli.compile import compile_command
from nvcre_argo.cli.main import cli
from nvcre_argo.compiler import CompileOptions, certification_warnings, check_certifications
from nvcre_argo.errors import format_path
from nvcre_argo.loading import load_certifications
from nvcre_argo.resolve.category import resolve_certification
from nvcre_argo.resolve.options import option_alias
from nvcre_argo.resolve.unimplemented import UNIMPLEMENTED_OPTIONS
from nvcre_argo.yamlio import dump_yaml
from tests.unit.corpus import EVERY_OPTION

REPO = Path(__file__).resolve().parents[2]
ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
NEMOTRON = {"domain": "training", "variant": "nemotron5-8b"}
DCGM = {"domain": "diagnostics", "variant": "dcgm-level1"}
BASE: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "cert", "namespace": "nvcre"},
    "spec": {"target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}, "categories": [ALL_REDUCE]},
}

# A value of each option that asks for something not implemented (EVERY_OPTION's, the corpus's legal values).
REFUSED_VALUES = {"saveTopK": 1}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(())


def document(*, categories: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    result = copy.deepcopy(BASE)
    result["spec"].update(spec)
    if categories is not None:
        result["spec"]["categories"] = categories
    return result


def problems(catalog: Catalog, doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, kind) of what `validate` (and `nvcre-compile`) refuse, in the order printed."""
    loaded = load_certifications(dump_yaml(doc), "cert.yaml")  # admission accepts every document here
    errors = check_certifications(loaded, catalog=catalog, options=CompileOptions())
    return [(format_path(error.path), error.kind) for error in errors]


def warnings(catalog: Catalog, doc: dict[str, Any]) -> list[tuple[str, str]]:
    loaded = load_certifications(dump_yaml(doc), "cert.yaml")
    return [(format_path(warning.path), warning.message) for warning in certification_warnings(loaded, catalog=catalog)]


def invoke(command: click.Command, *args: str) -> Result:
    return CliRunner().invoke(command, list(args), catch_exceptions=False)


def write(directory: Path, doc: dict[str, Any]) -> Path:
    path = directory / "cert.yaml"
    path.write_text(dump_yaml(doc), encoding="utf-8")
    return path


# --- options accepted by the API, not implemented -----------------------------------------------------------------


def test_the_refused_values_are_legal_values_of_the_api() -> None:
    assert {key: EVERY_OPTION[key] for key in REFUSED_VALUES} == REFUSED_VALUES


def test_every_unimplemented_option_has_a_refused_value_here() -> None:
    assert {option_alias(name) for name in UNIMPLEMENTED_OPTIONS} == set(REFUSED_VALUES)


@pytest.mark.parametrize("option", REFUSED_VALUES)
@pytest.mark.parametrize("level", ["global", "category"])
def test_an_unimplemented_option_set_explicitly_is_refused_at_its_path(
    catalog: Catalog, option: str, level: str
) -> None:
    value = REFUSED_VALUES[option]
    if level == "global":
        doc, path = document(**{option: value}), f"spec.{option}"
    else:
        doc, path = (
            document(categories=[{**NEMOTRON, "options": {option: value}}]),
            f"spec.categories[0].options.{option}",
        )

    assert problems(catalog, doc) == [(path, "not-implemented")]


def test_the_message_names_the_option_by_its_path_and_says_not_implemented_yet(catalog: Catalog) -> None:
    loaded = load_certifications(
        dump_yaml(document(categories=[{**NEMOTRON, "options": {"saveTopK": 2}}])), "cert.yaml"
    )
    (error,) = check_certifications(loaded, catalog=catalog, options=CompileOptions())

    assert error.render().startswith("cert.yaml: spec.categories[0].options.saveTopK: not implemented yet: ")
    assert "Megatron-LM keeps checkpoints by saveRetainInterval" in error.message


def test_a_value_asking_for_what_happens_anyway_is_accepted(catalog: Catalog) -> None:
    assert problems(catalog, document(categories=[{**NEMOTRON, "options": {"enableCheckpoint": False}}])) == []


@pytest.mark.parametrize(
    ("option", "value"),
    [
        pytest.param("measurementTimeout", "20s", id="measurementTimeout"),
        pytest.param("startupStallTimeoutSeconds", 20, id="startupStallTimeoutSeconds"),
        pytest.param("rdmaDeviceAccess", "hostPath", id="rdmaDeviceAccess-hostPath"),
        pytest.param("rdmaDeviceAccess", "devicePlugin", id="rdmaDeviceAccess-devicePlugin"),
        pytest.param("enableCheckpoint", True, id="enableCheckpoint"),
        pytest.param("storageClassName", "fast-rwx", id="storageClassName"),
        pytest.param("storageSize", "2Ti", id="storageSize"),
        pytest.param("maxRestarts", 1, id="maxRestarts"),
    ],
)
@pytest.mark.parametrize("level", ["global", "category"])
def test_the_implemented_reference_options_are_accepted_at_both_levels(
    catalog: Catalog, option: str, value: Any, level: str
) -> None:
    if level == "global":
        doc = document(**{option: value})
    else:
        doc = document(categories=[{**NEMOTRON, "options": {option: value}}])
    assert option not in {option_alias(name) for name in UNIMPLEMENTED_OPTIONS}
    assert problems(catalog, doc) == []


def test_catalog_defaults_of_unimplemented_options_never_trigger_a_refusal(catalog: Catalog) -> None:
    # nemotron's catalog entry carries maxRestarts 3 as its own default.
    nemotron = catalog.find("training", "nemotron5-8b")
    assert nemotron is not None
    assert (nemotron.defaults.max_restarts, nemotron.defaults.startup_stall_timeout_seconds) == (3, 1200)

    assert problems(catalog, document(categories=[ALL_REDUCE, NEMOTRON, DCGM])) == []


def test_every_category_setting_an_unimplemented_option_gets_its_own_error(catalog: Catalog) -> None:
    doc = document(
        saveTopK=1,
        categories=[{**NEMOTRON, "options": {"saveTopK": 2}}, ALL_REDUCE, {**NEMOTRON, "options": {"saveTopK": 3}}],
    )

    assert problems(catalog, doc) == [  # in document order: categories come before the global option here
        ("spec.categories[0].options.saveTopK", "not-implemented"),
        ("spec.categories[2].options.saveTopK", "not-implemented"),
        ("spec.saveTopK", "not-implemented"),
    ]


def test_checkpointing_is_refused_on_a_category_that_does_not_train_and_ignored_there_when_global(
    catalog: Catalog,
) -> None:
    on_all_reduce = document(categories=[{**ALL_REDUCE, "options": {"enableCheckpoint": True}}, NEMOTRON])
    global_option = document(enableCheckpoint=True, categories=[ALL_REDUCE, NEMOTRON])

    assert problems(catalog, on_all_reduce) == [("spec.categories[0].options.enableCheckpoint", "unsupported")]
    assert problems(catalog, global_option) == []


def test_admission_only_still_accepts_what_the_reference_api_accepts(tmp_path: Path) -> None:
    path = write(tmp_path, document(categories=[{**NEMOTRON, "options": {"saveTopK": 1}}]))

    full = invoke(cli, "validate", str(path))
    admission = invoke(cli, "validate", "--admission-only", str(path))
    compiled = invoke(compile_command, str(path))

    assert (full.exit_code, admission.exit_code, compiled.exit_code) == (1, 0, 1)
    assert "spec.categories[0].options.saveTopK: not implemented yet" in full.stderr
    assert full.stderr == compiled.stderr
    assert compiled.stdout == ""


# --- thresholds a category cannot measure -------------------------------------------------------------------------


def test_a_spec_level_threshold_is_dropped_with_a_warning_for_a_category_that_cannot_measure_it(
    catalog: Catalog,
) -> None:
    doc = document(thresholds={"busBandwidthGBps": "value >= 300"}, categories=[ALL_REDUCE, NEMOTRON, DCGM])
    loaded = load_certifications(dump_yaml(doc), "cert.yaml")
    resolved, errors = resolve_certification(loaded[0].certification.spec, catalog)

    assert errors == []
    assert [category.thresholds for category in resolved] == [{"busBandwidthGBps": "value >= 300"}, {}, {}]
    assert warnings(catalog, doc) == [
        (
            'spec.thresholds["busBandwidthGBps"]',
            "not applied to spec.categories[1] (training/nemotron5-8b), which cannot measure it; "
            "it measures goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec",
        ),
        (
            'spec.thresholds["busBandwidthGBps"]',
            "not applied to spec.categories[2] (diagnostics/dcgm-level1), which cannot measure it; "
            "it has no measurement a threshold can check (its verdict is the workload's exit code)",
        ),
    ]


def test_only_the_keys_a_category_cannot_measure_are_dropped(catalog: Catalog) -> None:
    doc = document(
        thresholds={"busBandwidthGBps": "value >= 300", "goodputRatio": "value >= 0.9"},
        categories=[ALL_REDUCE, NEMOTRON],
    )
    loaded = load_certifications(dump_yaml(doc), "cert.yaml")
    resolved, _ = resolve_certification(loaded[0].certification.spec, catalog)

    assert [category.thresholds for category in resolved] == [
        {"busBandwidthGBps": "value >= 300"},
        {"goodputRatio": "value >= 0.9"},
    ]
    assert [path for path, _ in warnings(catalog, doc)] == [
        'spec.thresholds["busBandwidthGBps"]',
        'spec.thresholds["goodputRatio"]',
    ]


def test_a_categorys_own_threshold_it_cannot_measure_is_an_error_at_its_path(catalog: Catalog) -> None:
    doc = document(categories=[{**NEMOTRON, "options": {"thresholds": {"busBandwidthGBps": "value >= 300"}}}])
    loaded = load_certifications(dump_yaml(doc), "cert.yaml")

    (error,) = check_certifications(loaded, catalog=catalog, options=CompileOptions())

    assert (format_path(error.path), error.kind) == (
        'spec.categories[0].options.thresholds["busBandwidthGBps"]',
        "inapplicable-threshold",
    )
    assert error.message.startswith("training/nemotron5-8b cannot measure busBandwidthGBps")
    assert warnings(catalog, doc) == []


def test_measurable_thresholds_give_no_warning(catalog: Catalog) -> None:
    doc = document(thresholds={"busBandwidthGBps": "value >= 300"}, categories=[ALL_REDUCE])
    assert warnings(catalog, doc) == []
    assert problems(catalog, doc) == []


@pytest.mark.parametrize("command", ["validate", "compile", "validate-only"])
def test_the_warning_goes_to_stderr_and_the_command_still_succeeds(tmp_path: Path, command: str) -> None:
    path = write(tmp_path, document(thresholds={"busBandwidthGBps": "value >= 300"}, categories=[ALL_REDUCE, DCGM]))
    result = {
        "validate": lambda: invoke(cli, "validate", str(path)),
        "compile": lambda: invoke(compile_command, str(path)),
        "validate-only": lambda: invoke(compile_command, "--validate-only", str(path)),
    }[command]()

    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0].startswith(
        f'{path}: spec.thresholds["busBandwidthGBps"]: warning: not applied to spec.categories[1] '
        "(diagnostics/dcgm-level1)"
    )
    assert "warning:" not in result.stdout


def test_admission_only_gives_no_compile_warning(tmp_path: Path) -> None:
    path = write(tmp_path, document(thresholds={"busBandwidthGBps": "value >= 300"}, categories=[DCGM]))
    result = invoke(cli, "validate", "--admission-only", str(path))

    assert (result.exit_code, result.stderr) == (0, "")


# --- the README says it ------------------------------------------------------------------------------------------


def test_every_known_difference_from_the_reference_gives_its_reason() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Known differences from the reference", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")][1:]

    assert rows, "the table has rows"
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split(" | ")]
        assert len(cells) == 4, row
        assert all(cells), row
    refused = next(row for row in rows if "refused by `validate`" in row)
    assert all(f"`{option}" in refused for option in REFUSED_VALUES)
