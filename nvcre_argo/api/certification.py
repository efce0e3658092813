"""The `Certification` resource (nvcre.nvidia.com/v1alpha1) as a whole document."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from nvcre_argo.api.base import ServerModel, SpecModel
from nvcre_argo.api.rules import cel_schema
from nvcre_argo.api.spec import SPEC_IMMUTABLE_RULE, CertificationSpec
from nvcre_argo.api.status import CertificationStatus

GROUP = "nvcre.nvidia.com"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Certification"
PLURAL = "certifications"


class ObjectMeta(ServerModel):
    """The part of metav1.ObjectMeta the tool reads; the API server owns the rest."""

    name: str | None = Field(default=None)
    generate_name: str | None = Field(default=None)
    namespace: str | None = Field(default=None)
    uid: str | None = Field(default=None)
    generation: int | None = Field(default=None)
    resource_version: str | None = Field(default=None)
    labels: dict[str, str] | None = Field(default=None)
    annotations: dict[str, str] | None = Field(default=None)


class Certification(SpecModel):
    """A suite of certification categories to run against a GPU node pool."""

    api_version: Literal["nvcre.nvidia.com/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Certification"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: Annotated[CertificationSpec, Field(json_schema_extra=cel_schema(SPEC_IMMUTABLE_RULE))]
    status: CertificationStatus | None = Field(default=None)
