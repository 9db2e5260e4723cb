# kernel-mcp developer tasks (GNU make).
#
#   make .venv      create ./.venv and install requirements-dev.txt (ipykernel, jupyter_client, ...)
#   make build      cargo build (debug)
#   make test       cargo test --all-targets against the ./.venv Python environment
#   make demo       run examples/quickstart.rs (an MCP client driving kernel-mcp)
#   make bench      release build + examples/bench.rs (kernel-mcp vs jupyter_client)
#   make lint       cargo fmt --check + cargo clippy -D warnings
#   make clean-venv remove ./.venv
#
# Works from scratch on a machine with only Rust and python3 (>= 3.10). Nothing is
# installed outside this directory: the venv's ipykernel wheel provides the python3
# kernelspec under .venv/share/jupyter/kernels/, which kernel-mcp finds via $VIRTUAL_ENV.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
CARGO  ?= cargo
VENV   := $(CURDIR)/.venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.requirements.stamp
REQS   := requirements-dev.txt

# Test parallelism: each test may start real kernels; keep it modest (2-core machines).
TEST_THREADS ?= 2

# Environment every target that runs kernel-mcp gets: select the venv for kernelspec
# discovery (VIRTUAL_ENV wins over CONDA_PREFIX) and tell tests which interpreter to use.
RUN_ENV := VIRTUAL_ENV=$(VENV) KERNEL_MCP_TEST_PYTHON=$(VPY)

.PHONY: help venv .venv build test demo bench lint fmt clean-venv

help:
	@sed -n 's/^#   make /  make /p' $(firstword $(MAKEFILE_LIST))

venv .venv: $(STAMP)

# Re-runs only when requirements-dev.txt changes (or the venv is missing).
$(STAMP): $(REQS)
	@if [ ! -x "$(VPY)" ] || ! "$(VPY)" -c 'import sys' >/dev/null 2>&1; then \
	  echo "creating $(VENV) with $$($(PYTHON) --version 2>&1)"; \
	  rm -rf "$(VENV)"; \
	  $(PYTHON) -m venv "$(VENV)"; \
	fi
	"$(VPY)" -m pip install --disable-pip-version-check --no-input -q -r $(REQS)
	"$(VPY)" -c 'import ipykernel, jupyter_client, matplotlib, nbformat'
	@test -f "$(VENV)/share/jupyter/kernels/python3/kernel.json" || \
	  { echo "error: $(VENV)/share/jupyter/kernels/python3/kernel.json missing after install" >&2; exit 1; }
	@touch $@
	@echo "venv ready: $(VENV)"

build:
	$(CARGO) build

test: $(STAMP)
	$(RUN_ENV) $(CARGO) test --all-targets -- --test-threads=$(TEST_THREADS)

demo: $(STAMP)
	$(CARGO) build --bins --examples
	$(RUN_ENV) $(CARGO) run --example quickstart

# --bins: `--examples` alone does not build the kernel-mcp binary the bench spawns.
bench: $(STAMP)
	$(CARGO) build --release --bins --examples
	$(RUN_ENV) KERNEL_MCP_BENCH_PYTHON=$(VPY) $(CARGO) run --release --example bench

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean-venv:
	rm -rf "$(VENV)"
