# Training image: CUDA PyTorch with the project installed; `docker run IMAGE fit --config ...`.
# Multi-GPU: docker run --gpus all --ipc=host -v "$PWD/datasets:/app/datasets" -v "$PWD/runs:/app/runs" IMAGE ...
# Another CUDA or torch: docker build --build-arg BASE=pytorch/pytorch:<tag> .
ARG BASE=pytorch/pytorch:2.14.1-cuda13.0-cudnn9-runtime
FROM ${BASE}

# TORCH_DISABLE_SHARE_RDZV_TCP_STORE: so `--entrypoint torchrun --max-restarts N` can restart workers (docs/distributed.md).
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY app app
COPY data data
COPY models models
COPY configs configs
# The project with its pyproject ranges: the base image's torch and torchvision satisfy them and stay.
# EXTRAS: the pyproject extras the image takes too, those of the optional parts that serve from it.
ARG EXTRAS=[serve]
# What it installs is the project itself, with the ranges of its extras that pyproject.toml gives.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ".${EXTRAS}" \
    && rm -rf build ./*.egg-info \
    && (id 1000 >/dev/null 2>&1 || useradd --uid 1000 --create-home trainer) \
    && mkdir datasets runs \
    && chown 1000:1000 datasets runs
USER 1000:1000

ENTRYPOINT ["python", "-m", "app"]
CMD ["fit", "--config", "configs/mnist.yaml", "--trainer.max_epochs", "1"]
