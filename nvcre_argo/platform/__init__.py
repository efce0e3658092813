"""Platform detection and the per-platform, per-GPU arms applied to a category's TrainingRuntime."""
