"""Kubernetes resource quantities: the grammar of k8s.io/apimachinery `resource.Quantity`, exact values, order.

The request <= limit rule compares these values, and the API server's CEL (`isQuantity`, `quantity().compareTo`)
must reach the same verdict as the offline loader, so the grammar is tested value by value.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from nvcre_argo.errors import InvalidDocumentError
from nvcre_argo.loading import load_certifications
from nvcre_argo.quantity import is_quantity, parse_quantity
from nvcre_argo.yamlio import dump_yaml
from tests.unit.corpus import build, mutate

EXACT_VALUES = [
    ("0", Fraction(0)),
    ("1", Fraction(1)),
    ("1.5", Fraction(3, 2)),
    (".5", Fraction(1, 2)),
    ("+1", Fraction(1)),
    ("-1", Fraction(-1)),
    ("100m", Fraction(1, 10)),
    ("1n", Fraction(1, 10**9)),
    ("1u", Fraction(1, 10**6)),
    ("1k", Fraction(1000)),
    ("1M", Fraction(10**6)),
    ("1G", Fraction(10**9)),
    ("1T", Fraction(10**12)),
    ("1P", Fraction(10**15)),
    ("1E", Fraction(10**18)),
    ("1Ki", Fraction(1024)),
    ("5Ki", Fraction(5 * 1024)),
    ("1Mi", Fraction(2**20)),
    ("500Gi", Fraction(500 * 2**30)),
    ("1Ti", Fraction(2**40)),
    ("1Pi", Fraction(2**50)),
    ("1Ei", Fraction(2**60)),
    ("1.5Gi", Fraction(3 * 2**29)),
    ("1e3", Fraction(1000)),
    ("1E-3", Fraction(1, 1000)),
    ("2e+2", Fraction(200)),
]


@pytest.mark.parametrize(("text", "value"), [pytest.param(text, value, id=text) for text, value in EXACT_VALUES])
def test_a_quantity_parses_to_its_exact_value(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value
    assert is_quantity(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("1.2.3", id="two-decimal-points"),
        pytest.param("Gi", id="suffix-without-number"),
        pytest.param("1GB", id="GB-is-not-a-suffix"),
        pytest.param("1K", id="uppercase-K-is-not-a-suffix"),
        pytest.param("1ki", id="lowercase-ki"),
        pytest.param("1 Gi", id="space-before-suffix"),
        pytest.param(" 1", id="leading-space"),
        pytest.param("1 ", id="trailing-space"),
        pytest.param("", id="empty"),
        pytest.param(".", id="just-a-point"),
        pytest.param("1e", id="exponent-without-digits"),
        pytest.param("e3", id="exponent-without-number"),
        pytest.param("--1", id="two-signs"),
        pytest.param("0x10", id="hexadecimal"),
        pytest.param("1GiB", id="GiB"),
        pytest.param("1Gi1", id="digits-after-suffix"),
        pytest.param("1Gi\n", id="trailing-newline"),
    ],
)
def test_text_outside_the_grammar_is_not_a_quantity(text: str) -> None:
    assert parse_quantity(text) is None
    assert not is_quantity(text)


@pytest.mark.parametrize(("value", "expected"), [(0, Fraction(0)), (6, Fraction(6)), (-2, Fraction(-2))])
def test_an_integer_is_its_own_quantity(value: int, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_not_a_quantity(value: bool) -> None:
    assert parse_quantity(value) is None


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [
        pytest.param("500m", "1", id="millicores-below-a-core"),
        pytest.param("999m", 1, id="millicores-below-an-integer"),
        pytest.param("1G", "1Gi", id="decimal-below-binary"),
        pytest.param("1Gi", "1025Mi", id="binary-units"),
        pytest.param("1e3", "1001", id="exponent-below-plain"),
        pytest.param("-1", "0", id="negative-below-zero"),
        pytest.param("1n", "1u", id="nano-below-micro"),
    ],
)
def test_quantities_order_by_value_across_units(smaller: str | int, larger: str | int) -> None:
    low, high = parse_quantity(smaller), parse_quantity(larger)

    assert low is not None
    assert high is not None
    assert low < high


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param("1000m", 1, id="millicores-and-integer"),
        pytest.param("1Gi", "1024Mi", id="Gi-and-Mi"),
        pytest.param("1e3", "1k", id="exponent-and-k"),
        pytest.param("0.5", "500m", id="decimal-and-millicores"),
        pytest.param("+2", "2", id="explicit-plus"),
    ],
)
def test_equal_quantities_in_different_spellings_compare_equal(left: str | int, right: str | int) -> None:
    assert parse_quantity(left) == parse_quantity(right)


@pytest.mark.parametrize(
    ("request_value", "limit_value", "within"),
    [
        pytest.param("1000m", 1, True, id="cpu-equal-across-forms"),
        pytest.param("1001m", 1, False, id="cpu-one-millicore-above"),
        pytest.param(4, "4.5", True, id="cpu-integer-below-decimal"),
        pytest.param("1.5", "1500m", True, id="cpu-decimal-equals-millicores"),
        pytest.param("2", "1999m", False, id="cpu-string-above-millicores"),
    ],
)
def test_the_cpu_request_limit_rule_uses_quantity_order(
    request_value: str | int, limit_value: str | int, within: bool
) -> None:
    resources = {"limits": {"cpu": limit_value}, "requests": {"cpu": request_value}}
    text = dump_yaml(build(mutate("spec.resources", resources)))

    if within:
        assert len(load_certifications(text, "cert.yaml")) == 1
    else:
        with pytest.raises(InvalidDocumentError) as caught:
            load_certifications(text, "cert.yaml")
        assert caught.value.kinds() == {("spec.resources", "rule")}
        assert str(caught.value) == "cert.yaml: spec.resources: requests.cpu must not exceed limits.cpu"


@pytest.mark.parametrize(
    ("request_value", "limit_value", "within"),
    [
        pytest.param("1024Mi", "1Gi", True, id="memory-equal-across-units"),
        pytest.param("1025Mi", "1Gi", False, id="memory-one-Mi-above"),
        pytest.param("1G", "1Gi", True, id="memory-decimal-G-below-binary-Gi"),
        pytest.param("1Gi", "1G", False, id="memory-binary-Gi-above-decimal-G"),
        pytest.param(1073741824, "1Gi", True, id="memory-bytes-integer-equal"),
    ],
)
def test_the_memory_request_limit_rule_uses_quantity_order(
    request_value: str | int, limit_value: str | int, within: bool
) -> None:
    resources = {"limits": {"memory": limit_value}, "requests": {"memory": request_value}}
    text = dump_yaml(build(mutate("spec.categories[1].options.resources", resources)))

    if within:
        assert len(load_certifications(text, "cert.yaml")) == 1
    else:
        with pytest.raises(InvalidDocumentError) as caught:
            load_certifications(text, "cert.yaml")
        assert caught.value.kinds() == {("spec.categories[1].options.resources", "rule")}
