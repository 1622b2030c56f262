# scripts/docker-smoke.sh's stand-in for pytorch/pytorch, which cannot be pulled where it runs: a Debian
# bookworm root file system (debootstrap, in the build context as rootfs.tar), Python 3.11 in a venv on
# PATH as conda's is there, and the same torch and torchvision, from the wheelhouse mounted on /wheels.
FROM scratch
ADD rootfs.tar /

ARG TORCH
# PIP_CERT: the system's certificate authorities, which the script makes the host's, for the project's pip.
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
# torchvision unpinned: the one in /wheels, which fits torch==TORCH.
# hadolint ignore=DL3013
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir --no-index --find-links /wheels "torch==${TORCH}" torchvision
