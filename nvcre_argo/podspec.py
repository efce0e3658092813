"""Edits of a pod spec as plain data, shared by the catalog's platform arms and the runtime renderer.

Here, below both, because the import layers put `platform` under `render`, and both change the same fields
the same way: an environment variable set in place, and the primary image swapped together with the init
containers that shared it (the ssh setup of the MPI launcher), never a sidecar with an image of its own.
"""

from __future__ import annotations

from typing import Any


def set_env(container: dict[str, Any], name: str, value: str) -> None:
    """Set one environment variable, replacing an existing entry of that name in place."""
    env = container.setdefault("env", [])
    for item in env:
        if item.get("name") == name:
            item.clear()
            item.update({"name": name, "value": value})
            return
    env.append({"name": name, "value": value})


def replace_pod_image(spec: dict[str, Any], image: str) -> None:
    """The primary container, and the init containers that shared its original image, get `image`."""
    containers = spec.get("containers") or []
    if not containers:
        return
    original = containers[0].get("image")
    containers[0]["image"] = image
    for init in spec.get("initContainers") or []:
        if init.get("image") == original:
            init["image"] = image
