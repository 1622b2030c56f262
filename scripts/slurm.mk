# The real-SLURM tests (tests/app/distributed/test_slurm.py) start munged, slurmctld and slurmd on
# 127.0.0.1: Debian's slurm-wlm and munge, installed without network beyond the package registry (their
# own services are not used).
.PHONY: slurm
test-all: slurm

slurm:
	@if ! command -v slurmctld >/dev/null && ! [ -x /usr/sbin/slurmctld ] && command -v apt-get >/dev/null; then \
		$(SUDO) apt-get install -y -qq slurm-wlm munge \
		|| { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq slurm-wlm munge; }; \
	fi
