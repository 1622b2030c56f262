#!/bin/bash
# Multi-node DDP with torchrun: run this same command on every node, e.g. 2 nodes of 4 GPUs:
#   NNODES=2 NPROC=4 RDZV=node0.example:29500 scripts/torchrun.sh --config configs/cifar10_resnet.yaml
# When a process dies, torchrun restarts the group (up to 3 times) and --ckpt_path last resumes last.ckpt
# in the same run folder. Restarts need the variable and the c10d rendezvous: without them the restarted
# processes read the previous attempt's addresses from torchrun's store (pytorch issues 135712, 167288).
set -euo pipefail
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
exec torchrun --nnodes "${NNODES:-1}" --nproc_per_node "${NPROC:-1}" --max-restarts "${RESTARTS:-3}" \
    --rdzv-backend c10d --rdzv-endpoint "${RDZV:-localhost:29500}" --rdzv-id "${RDZV_ID:-app-fit}" \
    -m app fit --trainer.num_nodes "${NNODES:-1}" --trainer.devices "${NPROC:-1}" --trainer.strategy ddp \
    "$@" --ckpt_path last
