# Included by the Makefile: the Docker image's test (an optional part of the template).
.PHONY: docker-test hadolint
lint: hadolint

hadolint: setup
	$(VENV)/bin/hadolint Dockerfile

# The Dockerfile built with buildah on a base of Debian's and PyPI's packages, then a short fit, a
# torchrun fit and an export in the image as its user (scripts/docker-smoke.sh); root only.
docker-test: setup fashion-mnist
	@command -v buildah >/dev/null && command -v debootstrap >/dev/null \
		|| $(SUDO) apt-get install -y -qq buildah debootstrap \
		|| { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq buildah debootstrap; }
	$(SUDO) env PYTHON=$(PYTHON) scripts/docker-smoke.sh
