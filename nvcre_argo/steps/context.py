"""Who and where a step is: the resolved category and the Workflow it runs in.

The CLI builds this from the environment the compiled Workflow sets (see `contract`); the steps themselves
never read the environment, so tests construct it directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvcre_argo.names import (
    LABEL_CATEGORY_INDEX,
    LABEL_CERTIFICATION,
    LABEL_MANAGED_BY,
    LABEL_WORKFLOW,
    MANAGED_BY,
)
from nvcre_argo.resolve.category import ResolvedCategory


@dataclass(frozen=True)
class StepContext:
    category: ResolvedCategory
    certification: str
    workflow_name: str
    workflow_uid: str
    namespace: str

    def owner_references(self) -> list[dict[str, Any]]:
        """Everything a step creates is owned by its Workflow, so deleting the Workflow deletes it."""
        return [
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Workflow",
                "name": self.workflow_name,
                "uid": self.workflow_uid,
                "blockOwnerDeletion": True,
            }
        ]

    def labels(self, **extra: str) -> dict[str, str]:
        return dict(
            sorted(
                {
                    LABEL_MANAGED_BY: MANAGED_BY,
                    LABEL_CERTIFICATION: self.certification,
                    LABEL_CATEGORY_INDEX: str(self.category.index),
                    LABEL_WORKFLOW: self.workflow_name,
                    **extra,
                }.items()
            )
        )


def parse_category(text: str) -> ResolvedCategory:
    """The `category` parameter (JSON) back into the model the compiler serialised."""
    return ResolvedCategory.model_validate_json(text, by_alias=True)
