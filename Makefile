# The README's commands. `make train`: the main job offline; `make test`: the test suite.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup upgrade fashion-mnist train test lint format bench docker-test gpu-wheels gpu-check

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

# The template against a plain loop and the seed scripts' loop, then the fast preset's time to
# accuracy (benchmarks/README.md).
bench: setup fashion-mnist
	$(PYTHON) -m benchmarks
	$(PYTHON) -m benchmarks --recipe configs/fashion_mnist_fast.yaml

# For a GPU machine without network (Python 3.12, torch in its image; scripts/gpu_image.txt): the
# wheels it lacks and Debian's Fashion-MNIST, into a fresh .whl/ (one version of each) to carry there.
# torchcodec 0.11 is the release for that image's torch 2.11; where it does not load, PIL decodes.
GPU_PINS ?= torchcodec==0.11.*
gpu-wheels: setup fashion-mnist
	rm -rf .whl
	$(PYTHON) scripts/gpu_wheels.py .whl $(GPU_PINS)
	mkdir -p .whl/fashion-mnist
	cp /usr/share/datasets/fashion-mnist/*.gz .whl/fashion-mnist/
	du -sh .whl

# Every GPU figure of benchmarks/README.md in one run (benchmarks/gpu_check.py), within 8 minutes, on
# the GPU machine: installs .whl/ offline into its python3 (as they are, should the image's versions
# not meet a wheel's requirements: a GPU lease is too short to lose to a version check), unpacks
# Fashion-MNIST into $(DATA) and, where it can, where Debian's package puts it (the GPU tests' fast
# preset reads it there), and writes $(OUT)/gpu-check.md and .json. DRY=1: the same parts on CPU at
# tiny sizes and on tiny random data, with this venv (tests/test_gpu_check.py).
OUT ?= gpu-check
DATA ?= datasets
GPU_PYTHON ?= python3
gpu-check:
ifeq ($(DRY),1)
	$(PYTHON) -m benchmarks.gpu_check --dry --out $(OUT)
else
	$(GPU_PYTHON) -m pip install --quiet --no-index --find-links .whl -r .whl/requirements.txt \
		|| $(GPU_PYTHON) -m pip install --quiet --no-index --no-deps .whl/*.whl
	mkdir -p $(DATA)/FashionMNIST/raw
	for f in .whl/fashion-mnist/*.gz; do gunzip -c $$f > $(DATA)/FashionMNIST/raw/$$(basename $$f .gz); done
	-[ -d /usr/share/datasets/fashion-mnist ] || { mkdir -p /usr/share/datasets && cp -r .whl/fashion-mnist /usr/share/datasets/; }
	PYTHONPATH=$(CURDIR) $(GPU_PYTHON) -m benchmarks.gpu_check --root $(DATA) --out $(OUT)
endif

# The Dockerfile built with buildah on a base of Debian's and PyPI's packages, then a short fit, a
# torchrun fit and an export in the image as its user (scripts/docker-smoke.sh); root only.
docker-test: setup fashion-mnist
	@command -v buildah >/dev/null && command -v debootstrap >/dev/null \
		|| $(SUDO) apt-get install -y -qq buildah debootstrap \
		|| { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq buildah debootstrap; }
	$(SUDO) env PYTHON=$(PYTHON) scripts/docker-smoke.sh
