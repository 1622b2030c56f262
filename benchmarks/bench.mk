# Included by the Makefile: the benchmarks (an optional part of the template).
.PHONY: bench gpu-wheels gpu-check

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

# The GPU figures of benchmarks/README.md (benchmarks/gpu_check.py) on the GPU machine: the default
# parts within 420 s with the install, each part's budget printed first (PARTS="steptests fm93 profile":
# those parts instead, the next call of the same lease). Installs .whl/ offline into its python3 (as they
# are, should the image's versions not meet a wheel's requirements: a GPU lease is too short to lose to
# a version check), unpacks Fashion-MNIST into $(DATA) and, where it can, where Debian's package puts it
# (the GPU tests' fast preset reads it there), and writes $(OUT)/gpu-check.md, .json and
# gpu-check-logs.tar.gz (every child's log, the profiles). OUT relative or absolute. DRY=1: the same
# parts on CPU at tiny sizes and on tiny random data, with this venv (tests/test_gpu_check.py); every part.
OUT ?= gpu-check
PARTS ?=
DATA ?= datasets
GPU_PYTHON ?= python3
gpu-check:
ifeq ($(DRY),1)
	$(PYTHON) -m benchmarks.gpu_check --dry --out $(OUT) $(if $(PARTS),--parts $(PARTS))
else
	$(GPU_PYTHON) -m pip install --quiet --no-index --find-links .whl -r .whl/requirements.txt \
		|| $(GPU_PYTHON) -m pip install --quiet --no-index --no-deps .whl/*.whl
	mkdir -p $(DATA)/FashionMNIST/raw
	for f in .whl/fashion-mnist/*.gz; do gunzip -c $$f > $(DATA)/FashionMNIST/raw/$$(basename $$f .gz); done
	-[ -d /usr/share/datasets/fashion-mnist ] || { mkdir -p /usr/share/datasets && cp -r .whl/fashion-mnist /usr/share/datasets/; }
	PYTHONPATH=$(CURDIR) $(GPU_PYTHON) -m benchmarks.gpu_check --root $(DATA) --out $(OUT) \
		$(if $(PARTS),--parts $(PARTS))
endif
