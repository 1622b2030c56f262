# The README's commands. `make train`: the main job offline; `make test`: the test suite.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup upgrade fashion-mnist train test lint format

setup: $(VENV)/.installed

# The versions CI last passed with (constraints.txt); `make upgrade` takes the newest pyproject.toml allows.
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $@

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

lint: setup
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(VENV)/bin/hadolint Dockerfile

# What the pre-commit hooks do, on the whole tree.
format: setup
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .

include benchmarks/bench.mk  # make bench; an optional part (benchmarks)
include docker.mk  # make docker-test; an optional part (Docker)
