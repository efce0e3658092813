"""Rendering: resolved categories → Kubernetes manifests (TrainingRuntime, TrainJob) and Argo Workflows (pure)."""
