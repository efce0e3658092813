"""Command-line interface: the only layer that reads files, the environment and kubeconfig, and prints."""
