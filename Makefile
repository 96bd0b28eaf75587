# The two commands: `make demo` and `make test` (`make check` is `make test`'s inner loop). Each does
# all of its own set-up.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
# `make demo` runs what a user installs (aiptrain alone, as the README's Install says) in a venv of
# its own: the job needs none of the test stack, and its runtime's environment is built on first use.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed
# `make test` runs the suite on this many pytest-xdist workers (tests/fixtures/worker_groups.py keeps
# each test file, and the tests of each marker that shares an expensive session fixture, on one
# worker), then the `ray_cluster` tests alone.
TEST_WORKERS ?= 2

# The `containers` tests start a Docker daemon of their own and import their images from
# busybox-static: Debian's packages, installed here when missing (as root; apt is not run otherwise).
CONTAINER_PACKAGES := docker.io busybox-static

.PHONY: demo test check fuzz lint bench docs clean venv chromium container-packages

# The console's browser tests (marker `browser`) drive Debian's chromium through Playwright, which
# cannot download a browser of its own here: installed with apt when missing (as root, or with sudo).
CHROMIUM := /usr/bin/chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/pip install --quiet -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	bash scripts/demo.sh $(DEMO_VENV)/bin

container-packages:
	@if PATH="$$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v dockerd >/dev/null && [ -x /bin/busybox ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $(CONTAINER_PACKAGES) for the container tests"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(CONTAINER_PACKAGES); \
	else echo "$(CONTAINER_PACKAGES) missing and not root: the container tests will be skipped (a failure in CI)"; fi

$(CHROMIUM):
	$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq
	$$( [ "$$(id -u)" = 0 ] || echo sudo ) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

chromium: $(CHROMIUM)

test: $(STAMP) $(CHROMIUM) container-packages
	$(BIN)/ruff check aiptrain tests bench trainer_template
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope -m "not ray_cluster"
	# The two-node Ray cluster of the `ray_cluster` tests gets the machine to itself: beside
	# TensorFlow tests on the other worker its jobs were starved past their timeouts.
	$(BIN)/python -m pytest -q -m ray_cluster
	# aiptrain installed on Python 3.12 and 3.13 (the suite runs on 3.11): CLI, dry run, a refusal and a
	# real TensorFlow job from each; in CI a missing interpreter is a failure, elsewhere it is skipped.
	AIPTRAIN_REQUIRE_PYTHONS=$${CI:+1} bash scripts/check_other_pythons.sh

# The inner loop while working, in under 3 minutes: ruff, mypy and the tests that need no runtime
# environment, container, browser, gcloud or Ray cluster (each of those costs is a marker), on
# TEST_WORKERS workers as `make test` runs them, less CHECK_SKIPPED: the suites that run jobs through
# the local engine, the emulator or the command line in subprocesses, build or install packages, or
# talk to fake-gcs-server, which take minutes, not seconds. `make test` stays the one that runs everything, before a push.
CHECK_MARKERS := not slow and not runtime_envs and not gcloud and not ray_cluster and not containers and not browser
CHECK_SKIPPED := tests/e2e tests/cli tests/emulator tests/backends/local tests/api tests/bench \
	tests/docs/test_readme.py tests/tuning/test_local_tuning.py tests/tuning/test_vertex_tuning.py \
	tests/backends/vertex/test_backend.py tests/backends/mlv1/test_backend.py \
	tests/backends/mlv1/test_faults_and_secrets.py tests/backends/mlv1/test_proxy_environment.py \
	tests/environments/test_stalled_installs.py tests/environments/test_install_cache.py \
	tests/environments/test_build_cancel.py tests/environments/test_pip_config.py \
	tests/submit/test_follow_unreachable.py tests/job/test_runtime_defaults.py tests/environments/test_dry_run.py \
	tests/packaging/test_init_command.py tests/packaging/test_packaging.py tests/tuning/test_search_quality.py \
	tests/storage/test_gcs.py

check: $(STAMP)
	$(BIN)/ruff check aiptrain tests bench trainer_template
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope -m "$(CHECK_MARKERS)" \
		$(addprefix --ignore=,$(CHECK_SKIPPED))

# Property-based tests with random seeds and many more examples than `make test` runs
# (tests/e2e/fuzz runs there too, with a fixed seed); HYPOTHESIS_MAX_EXAMPLES bounds each property.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz HYPOTHESIS_MAX_EXAMPLES=$${HYPOTHESIS_MAX_EXAMPLES:-300} $(BIN)/python -m pytest -q tests/e2e/fuzz

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP) container-packages
	$(BIN)/python -m bench.run

# The generated page of the manual: docs/reference/cli.md, from the click commands and the submit flag
# table (tests/docs fails while it is stale).
docs: $(STAMP)
	$(BIN)/python -m aiptrain._cli.reference docs/reference/cli.md

clean:
	rm -rf $(VENV) $(DEMO_VENV) .venv-py3.* build dist *.egg-info
