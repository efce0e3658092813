# nvcre-argo developer commands. `make run` and `make test` work on a fresh clone with nothing installed by hand.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXAMPLE := examples/gpu-cluster-cert.yaml
PYTEST_ARGS ?= -n 2 --dist loadfile
# One simulated cluster serves every end-to-end test, so they run in one process (no xdist).
E2E_ARGS ?= -p no:xdist --durations=25

.PHONY: help run test lint types contracts unit integration e2e demo testbin generate check-generated snapshots bench scorecard bench-overhead clean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	@touch $@

run: $(STAMP) ## Validate and compile the example Certification with the built-in catalog
	$(VENV)/bin/nvcre-argo validate $(EXAMPLE)
	@mkdir -p build
	$(VENV)/bin/nvcre-compile $(EXAMPLE) -o build
	@echo "Compiled into namespace nvcre (the Certification's): install the templates there first with"
	@echo "  'nvcre-argo install --watch-namespace nvcre' (or 'kubectl apply -n nvcre -f workflow_templates/'),"
	@echo "  then 'argo submit -n nvcre build/gpu-cluster-cert.yaml'"

test: lint types contracts check-generated testbin ## Everything CI checks: lint, types, layers, drift, all tests
	$(PYTHON) -m pytest -m 'not e2e' $(PYTEST_ARGS)
	$(PYTHON) -m pytest -m e2e $(E2E_ARGS)

lint: $(STAMP) ## ruff lint and format check
	$(VENV)/bin/ruff check nvcre_argo tests
	$(VENV)/bin/ruff format --check nvcre_argo tests

types: $(STAMP) ## mypy --strict
	$(VENV)/bin/mypy

contracts: $(STAMP) ## Import layers (import-linter)
	$(VENV)/bin/lint-imports

unit: $(STAMP) ## Unit tests only (no control plane)
	$(PYTHON) -m pytest -m 'not k8s and not e2e' $(PYTEST_ARGS)

integration: $(STAMP) testbin ## Integration tests against a real kube-apiserver + etcd
	$(PYTHON) -m pytest -m k8s $(PYTEST_ARGS)

e2e: $(STAMP) testbin ## End-to-end tests on the simulated GPU cluster (real Argo, Trainer, JobSet, controllers)
	$(PYTHON) -m pytest -m e2e $(E2E_ARGS)

demo: $(STAMP) testbin ## Run the example Certification on a simulated GPU cluster and print the report
	$(PYTHON) -m tests.sim.demo $(DEMO_ARGS)

testbin: ## Build into ~/.cache from Go modules, once per version: etcd, kube-apiserver/-controller-manager/-scheduler, Argo v3+v4 workflow-controller+argoexec, Argo's linter, argo server with its UI, Trainer, JobSet; install chromium
	bash hack/testbin.sh build
	bash hack/browser.sh install

generate: $(STAMP) ## Regenerate committed generated files (the CRD, workflow_templates/)
	$(VENV)/bin/nvcre-argo crd > crds/nvcre.nvidia.com_certifications.yaml
	$(VENV)/bin/nvcre-argo templates -o workflow_templates

check-generated: $(STAMP) ## Fail when committed generated files drift from their generators
	@$(VENV)/bin/nvcre-argo crd | diff -u crds/nvcre.nvidia.com_certifications.yaml - \
	  || { echo "crds/ is stale: run 'make generate' and commit the result" >&2; exit 1; }
	@$(VENV)/bin/nvcre-argo templates -o workflow_templates --check

snapshots: $(STAMP) ## Update syrupy snapshots after reviewing the change
	$(PYTHON) -m pytest -m 'not k8s and not e2e' --snapshot-update

bench: $(STAMP) testbin ## Benchmarks that print their figures (compile, watcher, fault isolation)
	$(PYTHON) -m tests.bench.bench_compile
	$(PYTHON) -m tests.bench.bench_watch
	$(PYTHON) -m tests.bench.bench_isolation
	$(PYTHON) -m tests.bench.bench_scale

scorecard: $(STAMP) testbin ## How well faults are found: recall/precision per fault kind on simulated 16- and 64-node clusters (~25 min; SCORECARD_ARGS="--training --seed 2")
	$(PYTHON) -m tests.bench.scorecard $(SCORECARD_ARGS)

bench-overhead: $(STAMP) testbin ## Orchestration overhead and footprint, a pod per group and --shared-runner, on a simulated 16-node cluster (~25 min; OVERHEAD_ARGS="--sizes 16,64 --duration 300")
	$(PYTHON) -m tests.bench.bench_overhead $(OVERHEAD_ARGS)

clean: ## Remove the virtualenv and caches (not the Go-built binaries in ~/.cache)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
