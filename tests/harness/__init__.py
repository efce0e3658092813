"""Test harness that runs a real Kubernetes control plane (etcd + kube-apiserver) without Docker.

The binaries are built from Go modules by ``hack/testbin.sh`` (``make testbin``); this package starts them on
loopback ports, issues the PKI they need, writes a kubeconfig and installs the CRDs the project depends on,
read straight from the Go module cache at the versions pinned in ``hack/testbin/versions.env``.
"""
