# dynosim: `make help` lists the targets. CI runs `make test` (via .ci/run).
.DEFAULT_GOAL := help
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: help
help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "maturin>=1.9.2,<2" "pytest>=8" "pandas>=2" "simpy>=4" "mypy>=1.10" "rich>=13" "matplotlib>=3.7" "numpy>=1.24" "hypothesis>=6.100" "pytest-xdist>=3.6,<4" "playwright>=1.49,<2" "starlette>=0.40,<2" "uvicorn>=0.30,<1" "httpx>=0.27,<1" "dask[distributed]>=2024.8,<2027"
	touch $@

.PHONY: install
install: $(VENV)/.installed ## create .venv with the build and test tools

.PHONY: build-dev
build-dev: install ## build the engine (release) and install the package editable into .venv
	$(VENV)/bin/maturin develop --release -q

# A wheel for machines without Rust: the stable ABI (abi3, Python 3.9 and later, from
# crates/dynosim-py's pyo3 abi3-py39) and manylinux2014 (glibc 2.17, the oldest the Rust
# compiler supports), linked with zig as maturin's docs recommend outside a manylinux image.
WHEEL_DIR ?= dist

.PHONY: wheel
wheel: install ## build an abi3 manylinux2014 wheel into dist/, installable without Rust (pip install dist/dynosim-*.whl)
	$(PIP) install -q "ziglang>=0.13,<0.18"
	rm -f $(WHEEL_DIR)/dynosim-*.whl
	PATH="$(abspath $(VENV))/bin:$$PATH" maturin build --release --compatibility manylinux2014 --zig --out $(WHEEL_DIR)

.PHONY: test-wheel
test-wheel: wheel ## install the wheel into a fresh venv with no cargo on PATH and run dynosim from it
	bash tools/test-wheel.sh $(WHEEL_DIR)

.PHONY: build-pgo
build-pgo: install ## build-dev with profile-guided optimisation (about 10% faster; tools/build-pgo.sh)
	bash tools/build-pgo.sh $(PY)

.PHONY: testbed-deps
testbed-deps: install ## install what the real-stack tests use: the testbed's HAProxy, nginx, PostgreSQL, Ruby, Puma, Unicorn, and Chromium (apt, as root), gunicorn, gevent, psycopg
	bash tools/install-testbed.sh $(PY)

.PHONY: test-rust
test-rust: ## engine tests (unit, theory, determinism), the load generator's and the log reader's; the dyno model's with debug assertions too
	cargo test --profile test-release -p dynosim-engine -p dynosim-load -p dynosim-logs
	cargo test -p dynosim-engine --test fuzz_dyno --test overhead --test dyno --test timeouts --test lifecycle

.PHONY: test-python
test-python: build-dev ## package, CLI and end-to-end tests: in parallel (pytest-xdist), then the real stack's one at a time
	$(PY) -m pytest -q --durations=20 -n auto --dist loadfile -m "not serial"; first=$$?; \
	$(PY) -m pytest -q --durations=20 -m serial; second=$$?; \
	exit $$(( first || second ))

.PHONY: check-imports
check-imports: ## no import cycles in any crate of the workspace (each on its own) or the Python package
	python3 tools/check_imports.py

.PHONY: test
test: check-imports test-rust test-python ## everything CI runs

.PHONY: fuzz
fuzz: build-dev ## explore with the fuzz target: random inputs, FUZZ_EXAMPLES per generator (default 2000)
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-2000} CI= $(PY) -m pytest -q tests/test_fuzz.py --hypothesis-show-statistics

.PHONY: lint
lint: build-dev ## rustfmt, clippy, type check and stub check
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -q -- -D warnings
	$(PY) -m mypy.stubtest dynosim._dynosim
	$(PY) -m mypy

.PHONY: screenshots
screenshots: build-dev ## refresh docs/images/ from the browser tests (Debian's Chromium)
	DYNOSIM_SCREENSHOTS=1 $(PY) -m pytest -q tests/test_browser.py

.PHONY: demo
demo: ## reproduce the seed study: its table, then dynos needed per policy and cost
	@echo "building the engine (the first build takes a minute or two)..."
	@# Quiet unless it fails: then the whole build log, to see why.
	@log=$$(mktemp); if $(MAKE) --no-print-directory build-dev >"$$log" 2>&1; then rm -f "$$log"; \
	  else status=$$?; cat "$$log"; rm -f "$$log"; echo "make demo: the build failed (log above)" >&2; exit $$status; fi
	@$(VENV)/bin/dynosim demo

.PHONY: bench
bench: build-pgo ## engine throughput (criterion), the seed scenario against its floor and the recorded baseline, and dynosim vs SimPy on the profile-guided build
	cargo bench -p dynosim-engine --bench engine
	$(PY) bench/seed_floor.py
	$(PY) bench/engine_vs_simpy.py

.PHONY: all
all: lint test ## lint and test

.PHONY: clean
clean: ## remove build outputs and .venv
	cargo clean
	rm -rf $(VENV) .pytest_cache
