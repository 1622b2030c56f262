# Included by the Makefile: the benchmarks (an optional part of the template).
.PHONY: bench

# The template against a plain loop and the seed scripts' loop, then the fast preset's time to
# accuracy (benchmarks/README.md).
bench: setup fashion-mnist
	$(PYTHON) -m benchmarks
	$(PYTHON) -m benchmarks --recipe configs/fashion_mnist_fast.yaml
