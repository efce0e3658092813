"""The in-workflow steps (`nvcre-argo step ...`) that run inside the compiled Argo Workflows."""
