# Training image: CUDA PyTorch, the project installed, `docker run IMAGE fit --config ...`.
# Multi-GPU: docker run --gpus all --ipc=host -v $PWD/datasets:/app/datasets -v $PWD/runs:/app/runs IMAGE ...
FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

WORKDIR /app
COPY pyproject.toml README.md ./
COPY app app
COPY data data
COPY models models
COPY configs configs
RUN pip install --no-cache-dir . \
    && useradd --create-home trainer \
    && mkdir -p datasets runs \
    && chown trainer datasets runs
USER trainer

ENTRYPOINT ["python", "-m", "app"]
CMD ["fit", "--config", "configs/mnist.yaml", "--trainer.max_epochs", "1"]
