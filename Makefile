# The two commands of the README: `make serve` and `make test`. Each sets up everything it needs.
PYTHON_VERSION ?= 3.11
UV_VERSION ?= 0.13.8
UV := python3 -m uv
PYTEST_WORKERS ?= 2
export UV_PYTHON := $(PYTHON_VERSION)

.PHONY: setup serve test lint typecheck importlint unit bench clean uvx-cache

setup:
	@python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"
	./scripts/install-system-deps.sh
	./scripts/build-console-assets.sh
	# Bytecode compiled at install, as pip does for a wheel: otherwise every `serve` start compiles its imports
	# again wherever PYTHONDONTWRITEBYTECODE is set (seconds of a restart; bench/ops/restart.py).
	$(UV) sync --frozen --all-extras --compile-bytecode

serve: setup
	$(UV) run ctxstore serve $(ARGS)

lint: setup
	$(UV) run ruff check .
	$(UV) run ruff format --check .

typecheck: setup
	$(UV) run mypy

importlint: setup
	$(UV) run lint-imports

# `uvx --from "ctxstore[client] @ file://<wheel>" ctxstore mcp` (README) resolves the client side against the
# package index; tests/ops/test_wheel_install.py runs it offline, so the cache is filled here, where set-up may
# download (offline first: nothing to fetch when the cache already holds it).
uvx-cache: setup
	$(UV) tool run --offline --isolated --from "ctxstore[client] @ file://$(CURDIR)" ctxstore --help >/dev/null 2>&1 \
	  || $(UV) tool run --isolated --from "ctxstore[client] @ file://$(CURDIR)" ctxstore --help >/dev/null

test: setup uvx-cache
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy
	$(UV) run lint-imports
	# A hard cap well inside the CI budget: whatever hangs, the run ends with a failure instead of a timeout.
	# Two workers, one test file each at a time (module and session fixtures stay per worker): most of the
	# suite waits on real servers, so two processes on two cores take 10 min where one took 15+.
	timeout -k 30 2700 $(UV) run pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

clean:
	rm -rf .venv node_modules layers/core/ctxstore/console/static/vendor .ctxstore .pytest_cache .mypy_cache .ruff_cache
