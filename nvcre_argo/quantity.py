"""Kubernetes resource quantities (`500Gi`, `64`, `1.5`, `100m`, `1e3`) parsed to exact fractions.

Why our own parser: the CRD's CEL rules compare quantities (`requests.cpu must not exceed limits.cpu`) and the
offline loader must agree with the API server on every document, so the grammar is the one in
k8s.io/apimachinery `resource.Quantity`, exactly, with no floating point.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)


def parse_quantity(value: str | int) -> Fraction | None:
    """The exact value of a quantity, or None when the text is not a Kubernetes quantity."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    match = _QUANTITY.fullmatch(value)
    if not match:
        return None
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        scaled = number * _BINARY[suffix]
    elif suffix in _DECIMAL:
        scaled = number * _DECIMAL[suffix]
    else:
        scaled = number * Fraction(10) ** int(suffix[1:])
    return -scaled if match["sign"] == "-" else scaled


def is_quantity(value: str | int) -> bool:
    return parse_quantity(value) is not None
