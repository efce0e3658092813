"""nvcre-argo: certify GPU Kubernetes node pools with Argo Workflows.

The package compiles a `Certification` (nvcre.nvidia.com/v1alpha1) into Argo Workflows, runs the in-workflow
steps, and keeps the Certification's status true. Public entry points are the `nvcre-compile` and `nvcre-argo`
commands; the modules are organised in layers (see README.md, "Layout").

`__version__` is the package version's one definition: pyproject.toml reads it (`dynamic = ["version"]`), and
the compiler stamps it on every Workflow and pins the step image to it, so the two can never disagree.
"""

__version__ = "0.1.0"
