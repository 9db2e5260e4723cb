# kernel-mcp developer tasks (GNU make).
#
#   make .venv      create ./.venv and install requirements-dev.txt (ipykernel, jupyter_client, ...)
#   make build      cargo build (debug)
#   make kernels    install the other real kernels the tests use: R (IRkernel) and Octave from
#                   Debian (apt, needs root or sudo), bash_kernel, octave_kernel, xeus-python into .venv
#   make test       make kernels, then cargo test --all-targets --features test-kernel (which builds
#                   the fake-kernel test binary) against the ./.venv Python environment, then the
#                   MCP suites once more through the shared service (serve --shared)
#   make broker-deps  the broker tests' reference MCP server (server-everything) and Node 22,
#                   from npm into tests/broker/node_modules (idempotent); part of `make test`
#   make oauth-deps  the OAuth tests' authorization server (oidc-provider, jose) and Node 22 from
#                   npm into tests/oauth/node_modules, and the MCP Python SDK (the OAuth client)
#                   from PyPI into tests/oauth/.venv (idempotent); part of `make test`
#   make conformance  the official MCP conformance suite (from npm, with Node 22) against the HTTP
#                   transport; part of `make test`
#   make gateways   install Jupyter Kernel Gateway + Jupyter Server + JupyterLab into ./.venv-gw,
#                   Jupyter Enterprise Gateway into ./.venv-eg and Jupyter Server with
#                   jupyter-collaboration (and pycrdt, nbformat) into ./.venv-collab (PyPI;
#                   idempotent) for tests/it/gateways.rs, the Jupyter face's tests and
#                   tests/it/collab.rs
#   make phoenix    Arize Phoenix (PyPI, pinned by tests/phoenix/requirements.txt) into ./.venv-phoenix:
#                   the trace backend tests/it/telemetry.rs starts (idempotent); part of `make test`
#   make phoenix-shot  one agent turn's trace in Phoenix's UI in headless Chromium: runs the
#                   telemetry test and copies its screenshot to docs/phoenix-trace.png
#   make browser    playwright-core (npm, no browser download) into tests/jupyterlab/node_modules,
#                   to drive Debian's chromium in tests/it/jupyterlab_browser.rs; part of `make test`
#   make jupyterlab-shot  JupyterLab in headless Chromium on an agent's session, and an agent working
#                   live in a person's notebook (jupyter-collaboration): runs those tests and copies
#                   their screenshots (target/jupyterlab/) to docs/jupyterlab-session.png and
#                   docs/notebook-live.png (make notebook-live-shot: the second alone)
#   make ui         the MCP Apps view: npm ci in ui/ (pinned by its package-lock.json), type-check,
#                   and build ui/dist/run.html, the one file the binary embeds (checked in, so
#                   building kernel-mcp needs no Node); `make test` checks it is not stale (ui-check)
#   make ui-shots   the view in headless Chromium against a real server (apps_view's browser test)
#                   and its screenshots (target/apps/) copied to docs/
#   make demo       build and run examples/quickstart.rs (an MCP client driving kernel-mcp; the
#                   `demo` feature's binary, so nothing test-only is compiled; without the default
#                   `otel` feature, so no OpenTelemetry crate either)
#   make bench      release build + examples/bench.rs (kernel-mcp vs jupyter_client, a raw Rust
#                   client and the MCP peer jupyter-mcp-kernel)
#   make bench-notebooks  the bench's notebook row alone: execute_cells of a 100-cell notebook next to
#                   nbclient, read_cells of a 1 000-cell one (NB_REPS, default 5); not in `make test`
#   make peer       the MCP peer the bench compares with (jupyter-mcp-kernel, pinned, PyPI) into
#                   target/peer-venv; part of `make bench`, not of `make test`
#   make soak       32 sessions, mixed workload, 10 minutes (SOAK_SESSIONS, SOAK_SECS); not in CI
#   make mcpb       the MCP Bundle target/mcpb/kernel-mcp-VERSION.mcpb (release build; manifest
#                   validated and packed by the official mcpb CLI from npm); part of `make test`
#                   with MCPB_PROFILE=dev
#   make wheel      the Python binary wheel (maturin, release build) into target/wheels/
#   make wheel-test make wheel, install it into a fresh venv and run it from a bare environment;
#                   also `cargo install --path .` into a temp root (exactly one binary).
#                   `make test` runs it with WHEEL_PROFILE=dev (a debug binary, built in seconds
#                   from the test build's dependencies)
#   make lint       cargo fmt --check + cargo clippy --all-targets --all-features -D warnings
#   make clean-venv remove ./.venv
#
# Needs beforehand: Rust (stable), python3 (>= 3.10), and npm for `make conformance` (any
# Node: the suite runs on the Node 22 it installs). What the targets install, and from where:
#   apt   `make kernels` (and so `make test`), system-wide, as root or through sudo, skipped
#         when present: r-cran-irkernel octave (IRkernel's spec: /usr/share/jupyter/kernels/ir),
#         chromium (JupyterLab in a headless browser)
#   PyPI  ./.venv-phoenix: tests/phoenix/requirements.txt (Arize Phoenix, the trace backend);
#         ./.venv: requirements-dev.txt (ipykernel, jupyter_client, nbformat, matplotlib…;
#         its ipykernel provides the python3 kernelspec that kernel-mcp finds via $VIRTUAL_ENV)
#         and requirements-kernels.txt (bash_kernel, octave_kernel, xeus-python); maturin for
#         `make wheel`; ./.venv-gw, ./.venv-eg and ./.venv-collab for `make gateways` (Kernel
#         Gateway + Jupyter Server, Enterprise Gateway, Jupyter Server with real-time
#         collaboration); a throwaway venv for `make wheel-test`
#   npm   `make oauth-deps`: oidc-provider, jose and Node 22 into tests/oauth/node_modules
#         (pinned by its package-lock.json), with the MCP Python SDK (PyPI) in tests/oauth/.venv;
#         `make conformance`: the MCP conformance suite and Node 22 into
#         tests/conformance/node_modules (pinned by its package-lock.json); `make browser`:
#         playwright-core into tests/jupyterlab/node_modules (pinned likewise); `make ui`: the
#         view's toolchain (ext-apps SDK, esbuild, TypeScript, playwright-core) into ui/node_modules
# Everything but the apt packages stays inside this directory (and the system temp dir).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
CARGO  ?= cargo
VENV   := $(CURDIR)/.venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.requirements.stamp
REQS   := requirements-dev.txt
KREQS  := requirements-kernels.txt
KSTAMP := $(VENV)/.kernels.stamp
# Debian packages for the R and Octave kernels. --no-install-recommends keeps Octave from
# pulling in a GUI, docs and compilers (~1 GB); neither kernel needs those.
APT_KERNEL_PKGS := r-cran-irkernel octave chromium

# Test parallelism: each test may start real kernels; keep it modest (2-core machines).
TEST_THREADS ?= 2

# Environment every target that runs kernel-mcp gets: select the venv for kernelspec
# discovery (VIRTUAL_ENV wins over CONDA_PREFIX) and tell tests which interpreter to use.
RUN_ENV := VIRTUAL_ENV=$(VENV) KERNEL_MCP_TEST_PYTHON=$(VPY)

# maturin (the wheel builder) comes from PyPI into .venv.
MATURIN     := $(VENV)/bin/maturin
MATURIN_REQ := maturin>=1.9,<2
WHEEL_DIR   := $(CURDIR)/target/wheels

.PHONY: help venv .venv peer phoenix phoenix-shot kernels apt-kernels gateways broker-deps oauth-deps browser jupyterlab-shot notebook-live-shot ui ui-check ui-shots build test conformance demo bench bench-notebooks soak fuzz lint fmt clean-venv wheel wheel-test mcpb

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

# Idempotent: apt runs only when a package is missing (`apt-get update` once, first), and the
# venv part re-runs only when requirements-kernels.txt changes. A failure here stops
# `make test` with the reason; the kernel tests also fail loudly when a kernel is missing.
kernels: apt-kernels $(KSTAMP)

apt-kernels:
	@missing=""; \
	for p in $(APT_KERNEL_PKGS); do \
	  [ "$$(dpkg-query -W -f='$${Status}' $$p 2>/dev/null)" = "install ok installed" ] || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  echo "apt: installing$$missing"; \
	  $$sudo apt-get update -q; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
	@test -f /usr/share/jupyter/kernels/ir/kernel.json || \
	  { echo "registering IRkernel's kernelspec system-wide"; \
	    if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	    $$sudo R --quiet --no-save -e 'IRkernel::installspec(user = FALSE)'; }
	@command -v octave-cli >/dev/null || command -v octave >/dev/null || \
	  { echo "error: octave not on PATH after installing it" >&2; exit 1; }

$(KSTAMP): $(KREQS) $(STAMP)
	"$(VPY)" -m pip install --disable-pip-version-check --no-input -q -r $(KREQS)
	"$(VPY)" -m bash_kernel.install --sys-prefix
	"$(VPY)" -m octave_kernel install --sys-prefix
	@for k in bash octave xpython; do \
	  test -f "$(VENV)/share/jupyter/kernels/$$k/kernel.json" || \
	    { echo "error: $(VENV)/share/jupyter/kernels/$$k/kernel.json missing after install" >&2; exit 1; }; \
	done
	@touch $@
	@echo "kernels ready: $$(ls $(VENV)/share/jupyter/kernels /usr/share/jupyter/kernels | grep -v : | tr '\n' ' ')"

# Remote-kernel test servers (tests/it/gateways.rs), each venv re-made only when its
# requirements change. Enterprise Gateway pins jupyter_server<2, so it gets a venv of its own;
# so does jupyter-collaboration (tests/it/collab.rs): in .venv-gw it would make the JupyterLab
# tests' server collaborative.
GW_VENV  := $(CURDIR)/.venv-gw
EG_VENV  := $(CURDIR)/.venv-eg
COLLAB_VENV  := $(CURDIR)/.venv-collab
GW_STAMP := $(GW_VENV)/.requirements.stamp
EG_STAMP := $(EG_VENV)/.requirements.stamp
COLLAB_STAMP := $(COLLAB_VENV)/.requirements.stamp

gateways: $(GW_STAMP) $(EG_STAMP) $(COLLAB_STAMP)

$(GW_STAMP): requirements-gateways.txt
	@test -x "$(GW_VENV)/bin/python" || $(PYTHON) -m venv "$(GW_VENV)"
	"$(GW_VENV)/bin/python" -m pip install --disable-pip-version-check --no-input -q -r requirements-gateways.txt
	"$(GW_VENV)/bin/python" -c 'import kernel_gateway, jupyter_server, jupyterlab, ipykernel, matplotlib'
	@touch $@

$(EG_STAMP): requirements-eg.txt
	@test -x "$(EG_VENV)/bin/python" || $(PYTHON) -m venv "$(EG_VENV)"
	"$(EG_VENV)/bin/python" -m pip install --disable-pip-version-check --no-input -q -r requirements-eg.txt
	"$(EG_VENV)/bin/python" -c 'import enterprise_gateway, ipykernel, matplotlib'
	@touch $@

$(COLLAB_STAMP): requirements-collab.txt
	@test -x "$(COLLAB_VENV)/bin/python" || $(PYTHON) -m venv "$(COLLAB_VENV)"
	"$(COLLAB_VENV)/bin/python" -m pip install --disable-pip-version-check --no-input -q -r requirements-collab.txt
	"$(COLLAB_VENV)/bin/python" -c 'import jupyter_collaboration, jupyter_server_ydoc, pycrdt, nbformat, ipykernel'
	@touch $@

# The telemetry tests' trace backend (tests/it/telemetry.rs): Arize Phoenix in a venv of its
# own (about 860 MB, a minute to install), re-made only when its pin changes.
PHOENIX_VENV  := $(CURDIR)/.venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.requirements.stamp

phoenix: $(PHOENIX_STAMP)

$(PHOENIX_STAMP): tests/phoenix/requirements.txt
	@test -x "$(PHOENIX_VENV)/bin/python" || $(PYTHON) -m venv "$(PHOENIX_VENV)"
	"$(PHOENIX_VENV)/bin/python" -m pip install --disable-pip-version-check --no-input -q -r tests/phoenix/requirements.txt
	@test -x "$(PHOENIX_VENV)/bin/phoenix" || { echo "error: $(PHOENIX_VENV)/bin/phoenix missing after install" >&2; exit 1; }
	@touch $@

phoenix-shot: $(STAMP) phoenix broker-deps browser
	$(RUN_ENV) KERNEL_MCP_PHOENIX_SHOT=1 $(CARGO) test --features test-kernel --test it -- --nocapture telemetry::a_callers_trace
	cp target/telemetry/phoenix-trace.png docs/phoenix-trace.png
	@echo "docs/phoenix-trace.png updated"

# playwright-core for the JupyterLab browser test, re-installed only when its lock changes.
BROWSER_DIR   := $(CURDIR)/tests/jupyterlab
BROWSER_STAMP := $(BROWSER_DIR)/node_modules/.installed.stamp

browser: $(BROWSER_STAMP)

$(BROWSER_STAMP): $(BROWSER_DIR)/package-lock.json
	cd "$(BROWSER_DIR)" && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The MCP Apps view (ui/): its npm toolchain, re-installed only when its lock changes.
UI_DIR   := $(CURDIR)/ui
UI_STAMP := $(UI_DIR)/node_modules/.installed.stamp
UI_SHOTS := view-plot view-table view-error view-live view-rich view-session view-dark-400

$(UI_STAMP): $(UI_DIR)/package-lock.json
	cd "$(UI_DIR)" && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

ui: $(UI_STAMP)
	cd "$(UI_DIR)" && npx tsc --noEmit -p . && node build.mjs

# Rebuilds the view in memory and fails when ui/dist/run.html differs from it.
ui-check: $(UI_STAMP)
	cd "$(UI_DIR)" && npx tsc --noEmit -p . && node build.mjs --check

ui-shots: $(STAMP) apt-kernels $(UI_STAMP)
	$(RUN_ENV) $(CARGO) test --features test-kernel --test it -- --nocapture apps_view::the_view_in_chromium
	for s in $(UI_SHOTS); do cp "target/apps/$$s.png" docs/; done
	@echo "docs/view-*.png updated"

# Both JupyterLab screenshots: a person's JupyterLab on the agent's session, and the agent
# working live in a person's notebook through jupyter-collaboration (notebook-live-shot alone).
jupyterlab-shot: $(STAMP) apt-kernels gateways browser
	$(RUN_ENV) $(CARGO) test --features test-kernel --test it -- --nocapture jupyterlab_browser::
	cp target/jupyterlab/jupyterlab-session.png docs/jupyterlab-session.png
	cp target/jupyterlab/notebook-live.png docs/notebook-live.png
	@echo "docs/jupyterlab-session.png and docs/notebook-live.png updated"

notebook-live-shot: $(STAMP) apt-kernels gateways browser
	$(RUN_ENV) $(CARGO) test --features test-kernel --test it -- --nocapture \
	  jupyterlab_browser::the_agents_cell_and_its_output_appear_in_the_persons_jupyterlab
	cp target/jupyterlab/notebook-live.png docs/notebook-live.png
	@echo "docs/notebook-live.png updated"

# The broker tests (tests/it/broker*.rs) call @modelcontextprotocol/server-everything on
# Node 22, both from npm, pinned by tests/broker/package-lock.json; installed once.
BROKER_STAMP := tests/broker/node_modules/.installed.stamp
broker-deps: $(BROKER_STAMP)

$(BROKER_STAMP): tests/broker/package-lock.json
	cd tests/broker && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The OAuth tests (tests/it/oauth.rs): a real authorization server (oidc-provider on Node 22,
# pinned by tests/oauth/package-lock.json) and a real MCP client (the MCP Python SDK, pinned by
# tests/oauth/requirements.txt, in a venv of its own); each installed once.
OAUTH_DIR      := $(CURDIR)/tests/oauth
OAUTH_STAMP    := $(OAUTH_DIR)/node_modules/.installed.stamp
OAUTH_VENV     := $(OAUTH_DIR)/.venv
OAUTH_PY_STAMP := $(OAUTH_VENV)/.requirements.stamp
oauth-deps: $(OAUTH_STAMP) $(OAUTH_PY_STAMP)

$(OAUTH_STAMP): $(OAUTH_DIR)/package-lock.json
	cd "$(OAUTH_DIR)" && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(OAUTH_PY_STAMP): $(OAUTH_DIR)/requirements.txt
	@test -x "$(OAUTH_VENV)/bin/python" || $(PYTHON) -m venv "$(OAUTH_VENV)"
	"$(OAUTH_VENV)/bin/python" -m pip install --disable-pip-version-check --no-input -q -r $(OAUTH_DIR)/requirements.txt
	"$(OAUTH_VENV)/bin/python" -c 'import mcp, httpx2'
	@touch $@

build:
	$(CARGO) build

# The MCP suites run a second time through `serve --shared` (the per-user service and the
# stdio relay), each test with a service of its own.
SHARED_SUITES := execute mcp_surface lifecycle faults ordering stdout_purity regression execution_trust \
  history_files history_export tasks resources broker broker_lifecycle notebooks notebooks_live

test: $(STAMP) kernels gateways broker-deps oauth-deps browser phoenix ui-check
	$(RUN_ENV) $(CARGO) test --all-targets --features test-kernel -- --test-threads=$(TEST_THREADS)
	$(RUN_ENV) KERNEL_MCP_TEST_SHARED=1 $(CARGO) test --features test-kernel --test it \
	  -- --test-threads=$(TEST_THREADS) $(addsuffix ::,$(SHARED_SUITES))
	$(MAKE) --no-print-directory conformance
	$(MAKE) --no-print-directory wheel-test WHEEL_PROFILE=dev
	$(MAKE) --no-print-directory mcpb MCPB_PROFILE=dev

# The official MCP conformance suite (Node 22 and the suite from npm, pinned by
# tests/conformance/package-lock.json) against `serve --transport http`; see
# tests/conformance/expected-failures.txt for the fixture-only checks that fail.
conformance: $(STAMP)
	$(CARGO) build --bin kernel-mcp
	$(RUN_ENV) tests/conformance/run.sh target/debug/kernel-mcp

# The MCP Bundle: mcpb/manifest.json and the kernel-mcp binary, validated and packed by the
# official mcpb CLI (npm, pinned by mcpb/package-lock.json, installed into mcpb/node_modules).
# `make test` packs the debug binary of its own build (MCPB_PROFILE=dev).
MCPB_PROFILE ?= release
MCPB_DIR     := $(if $(filter dev,$(MCPB_PROFILE)),debug,$(MCPB_PROFILE))
mcpb:
	$(CARGO) build --profile $(MCPB_PROFILE) --bin kernel-mcp
	mcpb/build.sh target/$(MCPB_DIR)/kernel-mcp target/mcpb

# The quickstart is a binary behind the `demo` feature: building it compiles the server's own
# dependencies and nothing test-only, and not the OpenTelemetry exporter (the `otel` feature,
# on by default everywhere else: `cargo build --features otel` when default features are off).
demo: $(STAMP)
	$(CARGO) build --no-default-features --features demo --bin kernel-mcp --bin quickstart
	$(RUN_ENV) target/debug/quickstart

# The best MCP peer with its own kernel, for the bench's peer rows: an MCP server (FastMCP,
# stdio) that starts a TCP daemon holding one ipykernel. Pinned; its own venv, so its
# ipykernel and jupyter_client are the ones it ships with.
PEER_VENV := $(CURDIR)/target/peer-venv
PEER_REQ  := jupyter-mcp-kernel==1.0.1
PEER_BIN  := $(PEER_VENV)/bin/jupyter-mcp

peer: $(PEER_BIN)

$(PEER_BIN):
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install --quiet '$(PEER_REQ)'

# --bins: `--examples` alone does not build the kernel-mcp binary the bench spawns.
bench: $(STAMP) gateways peer
	$(CARGO) build --release --bins --examples
	$(RUN_ENV) KERNEL_MCP_BENCH_PYTHON=$(VPY) KERNEL_MCP_BENCH_PEER=$(PEER_BIN) $(CARGO) run --release --example bench -- --json target/bench.json

# Row (p) of the bench alone: execute_cells of a 100-cell notebook next to nbclient on the
# same kernelspec (NB_REPS repetitions, alternating which goes first), and read_cells pages
# of a 1 000-cell notebook. Release build; not part of `make test`.
NB_REPS ?= 5
bench-notebooks: $(STAMP)
	$(CARGO) build --release --bins --examples
	$(RUN_ENV) KERNEL_MCP_BENCH_PYTHON=$(VPY) $(CARGO) run --release --example bench -- --only-notebooks --nb-reps $(NB_REPS) --json target/bench-notebooks.json

# Soak: SOAK_SESSIONS sessions (32) under a mixed workload for SOAK_SECS (600), watching the
# server's RSS, fds, threads and kernels; fails on growth, cross-talk or a leftover process.
SOAK_SECS ?= 600
SOAK_SESSIONS ?= 32
soak: $(STAMP)
	$(CARGO) build --release --bins --examples
	$(RUN_ENV) SOAK_SECS=$(SOAK_SECS) SOAK_SESSIONS=$(SOAK_SESSIONS) target/release/examples/soak

# Long fuzzing runs, outside `make test` (which runs proptest's default 256 cases per target).
# The tool-argument target makes one MCP round trip per case: about 9 of the run's 11 minutes.
FUZZ_CASES ?= 1000000
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release --features test-kernel --lib fuzz_
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release --features test-kernel --test it -- fuzz::

$(MATURIN): $(STAMP)
	"$(VPY)" -m pip install --disable-pip-version-check --no-input -q "$(MATURIN_REQ)"

# The wheel's binary is a release build (target/release, shared with `make bench`), or with
# WHEEL_PROFILE=dev a debug one that reuses the test build's dependencies.
WHEEL_PROFILE ?= release
wheel: $(MATURIN)
	rm -f $(WHEEL_DIR)/kernel_mcp-*.whl
	"$(MATURIN)" build --profile $(WHEEL_PROFILE) --strip --out $(WHEEL_DIR)
	@ls -l $(WHEEL_DIR)/kernel_mcp-*.whl

# The wheel test reuses the debug test build; `cargo install --debug` (CARGO_TARGET_DIR=target)
# reuses the debug dependencies: it checks what gets installed, not how fast it runs.
wheel-test: wheel
	$(RUN_ENV) KERNEL_MCP_WHEEL="$$(ls -t $(WHEEL_DIR)/kernel_mcp-*.whl | head -1)" KERNEL_MCP_WHEEL_PYTHON=$(PYTHON) \
	  $(CARGO) test --features test-kernel --test it -- --nocapture wheel_install::
	@root=$$(mktemp -d); \
	CARGO_TARGET_DIR=$(CURDIR)/target $(CARGO) install --quiet --debug --path . --root "$$root"; \
	bins=$$(ls "$$root/bin"); rm -rf "$$root"; \
	[ "$$bins" = "kernel-mcp" ] || { echo "error: cargo install left '$$bins' in bin/, not kernel-mcp alone" >&2; exit 1; }; \
	echo "cargo install: bin/ holds kernel-mcp alone"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets --all-features -- -D warnings

fmt:
	$(CARGO) fmt --all

clean-venv:
	rm -rf "$(VENV)"
