# Horde: every target does its own set-up on a fresh machine (Python venv, dependencies,
# the native engine built optimised). Rust is built once per profile: the engine's tests in
# target/release, the Python extension in target/wheel (`release` with link-time optimisation
# over every crate, Cargo.toml).

VENV   := .venv
PYTHON := $(VENV)/bin/python
HORDE  := $(VENV)/bin/horde
CARGO  ?= cargo

# The wheel: abi3 (one file for CPython 3.11 and later), the engine inside, built with the
# `wheel` profile and the venv's interpreter as `make setup` builds it, so that it reuses that
# build (only the wheel is packed). maturin checks the policy against the symbols the engine
# links: this Debian 12 host's glibc gives manylinux_2_34 (manylinux2014 needs a manylinux
# container or zig: `make wheel MANYLINUX=manylinux2014 MATURIN_FLAGS=--zig`).
DIST      ?= target/dist
MANYLINUX ?= manylinux_2_34
MATURIN_FLAGS ?=

.PHONY: setup wheel wheel-build demo test test-rust test-python bench bench-scenario bench-monitors bench-sql bench-gateway bench-link bench-long bench-open bench-report lint format clean

$(PYTHON):
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip

# Python extras installed with Horde: the tests also bring Ray (the cluster tests start a
# local multi-node Ray cluster); the demo does not need it.
EXTRAS ?= test

# Installs the Python dependencies and builds the engine into the venv (incremental).
setup: $(PYTHON)
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found"; echo "hint: install Rust with rustup (https://rustup.rs), then rerun"; exit 2; }
	$(PYTHON) -m pip install --quiet "maturin>=1.7,<2"
	$(VENV)/bin/maturin develop --profile wheel --extras $(EXTRAS) --quiet

# Builds $(DIST)/horde-VERSION-cp311-abi3-MANYLINUX_x86_64.whl: installs with pip and no Rust
# toolchain (tests/test_wheel.py installs it in a fresh venv and runs the quick start from it).
wheel: setup
	$(MAKE) --no-print-directory wheel-build

# The wheel from the venv as it is (tests/test_wheel.py calls this: `setup` would reinstall the
# engine under the running tests).
wheel-build:
	$(VENV)/bin/maturin build --profile wheel --interpreter $(PYTHON) --compatibility $(MANYLINUX) --out $(DIST) $(MATURIN_FLAGS)

# The quick start: the built-in target on loopback, examples/quickstart live, stored in SQLite.
demo: setup
	scripts/demo.sh

test: EXTRAS = test,cluster
test: setup test-rust test-python

test-rust:
	$(CARGO) test --release --workspace --exclude horde-py

test-python: EXTRAS = test,cluster
test-python: setup
	$(VENV)/bin/pytest tests

# Horde against wrk on loopback, against the built-in target and nginx (needs the Debian package
# wrk; nginx is skipped with a note when not installed), then open-model accuracy (< 5 min);
# see bench/README.md.
bench: setup
	$(PYTHON) bench/run.py --quick
	$(PYTHON) bench/open_accuracy.py --seconds 5

# The scenario language's cost per request against the same requests sent fixed (~4 min).
bench-scenario: setup
	$(PYTHON) bench/scenario.py --reps 5 --seconds 10

# The monitors' cost: CPU per sample of each source, the generator with and without them (~3 min;
# needs PostgreSQL's server binaries and prometheus-node-exporter).
bench-monitors: setup
	$(PYTHON) bench/monitors.py --reps 5 --seconds 10

# Horde against pgbench: tx/s and client CPU per transaction on the same scripts (~2.5 min; needs
# PostgreSQL's server binaries and pgbench).
bench-sql: setup
	$(PYTHON) bench/sql.py --reps 5 --seconds 5

# Messages/s one generator core sends and receives against the built-in gateway over TCP, UDP and
# KCP, and its CPU per message (~1 min).
bench-gateway: setup
	$(PYTHON) bench/gateway.py --reps 2 --seconds 5

# The emulated link's own cost (horde link; needs root): packets/s relayed, CPU per packet.
bench-link: setup
	$(PYTHON) bench/link.py --reps 2 --seconds 5

# The open model against wrk2 at 5,000 and 20,000 arrivals/s: CPU per request and p50/p99/p99.9
# (~5 min; wrk2 from PATH, or built with `make` in HORDE_WRK2_SRC; skipped with a note otherwise).
bench-open: setup
	$(PYTHON) bench/open_cost.py --reps 3 --seconds 20

# Generator memory over 30 minutes of steady load (the game scenario); growth under 5 %.
bench-long: setup
	$(PYTHON) bench/long_run.py --minutes 30

# The size of `horde report`'s file: a short, a 30-minute (synthesized) and a cluster run (~40 s).
bench-report: setup
	$(PYTHON) bench/report_size.py

# The house rules CI keeps (.ci/run): the code as the formatters write it (rustfmt.toml,
# pyproject's [tool.ruff]), clippy with warnings as errors, mypy --strict, and the native
# module's stub checked against the built extension (stubtest). `make format` writes it so.
lint: setup
	$(CARGO) fmt --all --check
	$(VENV)/bin/ruff format --check python tests bench examples
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	$(VENV)/bin/mypy --strict python/horde
	$(VENV)/bin/python -m mypy.stubtest horde._engine --allowlist tests/engine_stub_allowlist.txt

format: setup
	$(CARGO) fmt --all
	$(VENV)/bin/ruff format python tests bench examples

clean:
	rm -rf $(VENV) target
