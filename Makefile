# The README's commands. `make train`: the main job offline; `make test`: the fast tier of the test suite;
# `make test-all`: with the full tier (processes, servers, copier), what CI runs.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup upgrade fashion-mnist train test test-all test-lowest lint format

setup: $(VENV)/.installed

# The versions CI last passed with (constraints.txt); `make upgrade` takes the newest pyproject.toml allows.
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --no-compile -c constraints.txt -e ".[dev]"
	$(call compile,$(VENV))
	touch $@

# pip byte-compiles what it installs one file at a time; compileall on every core takes less than half
# of that on 2 cores. Its exit status 1 is for the few files written for newer Pythons (torch's), which
# pip's own compile skips too.
compile = $(1)/bin/python -m compileall -qq -j 0 $(1)/lib || true

upgrade:
	rm -rf $(VENV)
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade -e ".[dev]"
	{ sed -n '1,2p' constraints.txt; $(PYTHON) -m pip freeze --exclude-editable | grep -v ' @ '; } > constraints.new
	mv constraints.new constraints.txt
	touch $(VENV)/.installed
	$(MAKE) test

# Debian's dataset-fashion-mnist package: the real Fashion-MNIST, installed without network.
fashion-mnist:
	@if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null; then \
		$(SUDO) apt-get install -y -qq dataset-fashion-mnist \
		|| { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq dataset-fashion-mnist; }; \
	fi

train: setup fashion-mnist
	$(PYTHON) -m app fit --config configs/fashion_mnist.yaml

test: setup fashion-mnist
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m pytest

# Both tiers (-m replaces pyproject.toml's 'not slow and not full'), a worker more than the cores: the full
# tier's tests spend much of their time waiting on servers, signals and timeouts, which leaves cores idle
# (2 cores, 2 workers: 1.5 of them busy on average). Each worker takes the next test as it frees up, in
# the order tests/conftest.py gives (the long ones first), so that short ones end the run.
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test-all: setup fashion-mnist
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m pytest -m 'not slow' -n $(WORKERS) --dist load --maxschedchunk 2

# The lowest versions pyproject.toml allows (scripts/lowest.py pins each requirement to its lower bound),
# in .venv-lowest (torch 2.6.0 from PyPI: about 3 GB of CUDA wheels), on what the versions change:
# the fast tests of the CLI, resume, DDP and each dependency's use, and the full tests marked `versions`
# (one DDP and one torchrun launch, the gloo groups' exit and timeouts, W&B's offline run, signals, full
# disks); `make test-lowest LOWEST_TESTS=tests LOWEST_MARKS='not slow'`: the whole suite.
LOWEST := .venv-lowest
# Those of an optional part that was dropped are left out ($(wildcard)).
LOWEST_TESTS ?= $(wildcard tests/app/test_cli.py tests/app/test_bad_input.py tests/app/test_internals.py \
	tests/app/runs tests/app/distributed/test_distributed.py tests/app/distributed/test_no_hangs.py \
	tests/app/ema tests/app/export tests/app/pictures tests/data/image_folder/test_photos.py \
	tests/app/wandb_logger tests/models/test_backbone.py tests/test_sweeps.py)

LOWEST_MARKS ?= not slow and (not full or versions)

test-lowest: $(LOWEST)/.installed fashion-mnist
	$(LOWEST)/bin/python -m pytest -p no:cacheprovider -m "$(LOWEST_MARKS)" $(LOWEST_TESTS)

# Remade when pyproject.toml's bounds change, like .venv (.ci/run makes it while the full tier runs).
$(LOWEST)/.installed: pyproject.toml scripts/lowest.py
	rm -rf $(LOWEST)
	python3 -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install --quiet packaging 'tomli; python_version < "3.11"'
	$(LOWEST)/bin/python scripts/lowest.py > $(LOWEST)/constraints.txt
	cat $(LOWEST)/constraints.txt
	$(LOWEST)/bin/python -m pip install --quiet --no-compile -c $(LOWEST)/constraints.txt -e ".[dev]"
	$(call compile,$(LOWEST))
	touch $@

lint: setup
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

# What the pre-commit hooks do, on the whole tree.
format: setup
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .

include app/tune/tune.mk  # PostgreSQL for the tests of python -m app tune; an optional part (tune)
include benchmarks/bench.mk  # make bench; an optional part (benchmarks)
include docker.mk  # make docker-test; an optional part (Docker)
include scripts/slurm.mk  # slurm-wlm and munge for the real-SLURM tests of scripts/slurm.sbatch
