"""The one base configuration every API model shares.

camelCase aliases (the YAML spelling), frozen instances (a loaded Certification is a value, not a state), and
`extra="forbid"` for input we own so a misspelt field is an error with a hint rather than silently ignored.
Server-filled data (object metadata, status written by other versions) uses the tolerant variant.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class SpecModel(BaseModel):
    """Input we own: unknown fields are rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        strict=True,
    )


class ServerModel(BaseModel):
    """Data another party may extend (metadata, status): unknown fields are ignored, not rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
    )
