"""What `--submit` tells about a Certification it compiled: the warnings `nvcre-compile` prints, as Events.

A spec-level threshold is dropped for a category that cannot measure it (resolve.thresholds); `nvcre-compile`
prints that on stderr, and the watcher, which compiles Certifications applied with kubectl, must say the same
where their authors look: its log and a Warning Event on the Certification.
"""

from __future__ import annotations

from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.compiler import certification_warnings
from nvcre_argo.errors import FieldError, MapKey
from nvcre_argo.loading import LoadedCertification, parse_certification
from nvcre_argo.watch.events import Event, compile_warning_events

DOCUMENT = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "cert", "namespace": "team-a"},
    "spec": {
        "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
        "thresholds": {"busBandwidthGBps": "value >= 300"},
        "categories": [
            {"domain": "communication", "variant": "nccl-all-reduce"},
            {"domain": "training", "variant": "nemotron5-8b"},
        ],
    },
}


def test_a_spec_threshold_a_category_cannot_measure_becomes_one_warning_event_naming_path_and_category() -> None:
    loaded = LoadedCertification("team-a/cert", parse_certification(DOCUMENT, "cert"))
    warnings = certification_warnings([loaded], catalog=load_catalog(()))

    events = compile_warning_events(warnings)

    assert [(event.type, event.reason) for event in events] == [("Warning", "ThresholdNotApplied")]
    assert events[0].message.startswith('spec.thresholds["busBandwidthGBps"]: not applied to spec.categories[1] (')
    assert "team-a/cert" not in events[0].message  # the Event is already about the Certification


def test_other_compile_warnings_are_events_too_in_the_order_given() -> None:
    warnings = [
        FieldError(("spec", "thresholds", MapKey("x")), "inapplicable-threshold", "dropped", "ns/c"),
        FieldError(("spec", "image"), "something-else", "deprecated", "ns/c"),
    ]
    assert compile_warning_events(warnings) == [
        Event("Warning", "ThresholdNotApplied", 'spec.thresholds["x"]: dropped'),
        Event("Warning", "CompileWarning", "spec.image: deprecated"),
    ]


def test_no_warning_no_event() -> None:
    assert compile_warning_events([]) == []
