#!/usr/bin/env bash
# Builds the Dockerfile and trains in the image, on a machine with buildah but no Docker engine and no
# container registry (`make docker-test`; tests/test_docker.py runs it under `pytest -m slow`).
#
#   1. A base standing in for the Dockerfile's default, pytorch/pytorch:<torch>-cuda...: Debian from
#      debootstrap, Python in a venv, and that torch with its torchvision from PyPI
#      (scripts/docker-smoke-base.Dockerfile). Built once, then reused.
#      Its 3 GB of wheels are downloaded once by the host's pip into a wheelhouse, $WORK/wheels.
#   2. The project's Dockerfile on that base, only `--build-arg BASE` changed: its `pip install .` sees
#      PyPI alone, as in a real build, so it would download another torch if pyproject's ranges asked.
#   3. In the image, as the image's user, with ENTRYPOINT and CMD as the image has them: --help, the CMD
#      parsed, one short fit on Fashion-MNIST (Debian's dataset-fashion-mnist, mounted read-only), an
#      export of its checkpoint, which then classifies a picture, and a fit under torchrun (docs/distributed.md's
#      `--entrypoint torchrun`) with 2 processes.
#   4. Checks that torch in the image is the base's (the project's install did not replace it), and copies
#      the run folder out to $WORK/out.
#
# Needs root and: apt-get install buildah debootstrap dataset-fashion-mnist
# Environment: WORK (default /var/tmp/cnn-template-docker: wheels, base, images), TORCH (the base's
# torch; default: the one of the Dockerfile's default base), PYTHON (the host's, for pip download;
# default .venv/bin/python), STORAGE_DRIVER (overlay; vfs where overlay cannot mount).
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${WORK:-/var/tmp/cnn-template-docker}
PYTHON=${PYTHON:-.venv/bin/python}
STORAGE_DRIVER=${STORAGE_DRIVER:-overlay}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
FASHION_MNIST=/usr/share/datasets/fashion-mnist
# ARG BASE=pytorch/pytorch:2.14.1-cuda13.0-cudnn9-runtime -> 2.14.1
TORCH=${TORCH:-$(sed -n 's|^ARG BASE=pytorch/pytorch:\([0-9.]*\)-.*|\1|p' Dockerfile)}
# Tagged with its recipe: a change to scripts/docker-smoke-base.Dockerfile builds a new one.
BASE=localhost/cnn-template-base:torch-$TORCH-$(sha256sum scripts/docker-smoke-base.Dockerfile | cut -c1-8)
IMAGE=localhost/cnn-template:smoke

step() { printf '\n== %s\n' "$*"; }
fail() {
    echo "docker-smoke: FAILED: $*" >&2
    exit 1
}
# buildah with its images kept in $WORK, apart from any other use of buildah or podman on the machine.
buildah() { command buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver "$STORAGE_DRIVER" "$@"; }

[ "$(id -u)" = 0 ] || fail "run as root (debootstrap and buildah's chroot isolation)"
for tool in buildah debootstrap; do
    command -v "$tool" >/dev/null || fail "$tool missing: apt-get install buildah debootstrap"
done
[ -d "$FASHION_MNIST" ] || fail "$FASHION_MNIST missing: apt-get install dataset-fashion-mnist"
[ -n "$TORCH" ] || fail "no torch version in the Dockerfile's ARG BASE: set TORCH"
mkdir -p "$WORK/wheels"

# 1. The wheelhouse: the base's torch and torchvision with their dependencies (CUDA's libraries).
if [ ! -e "$WORK/wheels/.done-torch-$TORCH" ]; then
    step "wheelhouse $WORK/wheels: torch==$TORCH and its torchvision"
    "$PYTHON" -m pip download --quiet --progress-bar off --dest "$WORK/wheels" "torch==$TORCH" torchvision
    touch "$WORK/wheels/.done-torch-$TORCH"
fi

# 2. The base, once per torch version and recipe.
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
    step "base $BASE: debootstrap bookworm, Python, torch $TORCH"
    rm -rf "$WORK/rootfs" "$WORK/base" && mkdir -p "$WORK/base"
    debootstrap --variant=minbase --include=python3,python3-venv,passwd,ca-certificates \
        bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log"
    # pip in the images trusts what the host trusts (a proxy's certificate authority, where there is one).
    cp /etc/ssl/certs/ca-certificates.crt "$WORK/rootfs/etc/ssl/certs/ca-certificates.crt"
    tar -C "$WORK/rootfs" -cf "$WORK/base/rootfs.tar" .
    rm -rf "$WORK/rootfs"
    buildah bud --isolation chroot --volume "$WORK/wheels:/wheels:ro" --build-arg "TORCH=$TORCH" \
        -f "$PWD/scripts/docker-smoke-base.Dockerfile" -t "$BASE" "$WORK/base"
fi

# 3. The project's image: what `docker build --build-arg BASE=$BASE .` does.
step "build $IMAGE on $BASE"
started=$SECONDS
buildah bud --isolation chroot --build-arg "BASE=$BASE" -t "$IMAGE" .
build_s=$((SECONDS - started))
buildah rm --all >/dev/null
buildah rmi --prune >/dev/null 2>&1 || true # the previous build's image, now untagged

# 4. In the image. `buildah run` starts the command it is given as the image's USER in its WORKDIR with its
# ENV, but not through ENTRYPOINT: that is prepended here.
step "run in $IMAGE"
started=$SECONDS
base_ctr=$(buildah from "$BASE")
ctr=$(buildah from "$IMAGE")
trap 'buildah rm "$ctr" "$base_ctr" >/dev/null 2>&1 || true' EXIT
# --hostname localhost: Docker puts a container's hostname in its /etc/hosts, buildah run does not, and
# torch.distributed's rendezvous waits forever on a hostname that does not resolve.
run() { buildah run --isolation chroot --hostname localhost --volume "$FASHION_MNIST:$FASHION_MNIST:ro" "$ctr" -- "$@"; }
read -ra entrypoint <<<"$(buildah inspect --type image --format '{{range .OCIv1.Config.Entrypoint}}{{.}} {{end}}' "$IMAGE")"
read -ra cmd <<<"$(buildah inspect --type image --format '{{range .OCIv1.Config.Cmd}}{{.}} {{end}}' "$IMAGE")"
echo "ENTRYPOINT ${entrypoint[*]}; CMD ${cmd[*]}"

torch_version='import torch; print(torch.__version__)'
base_torch=$(buildah run --isolation chroot "$base_ctr" -- python -c "$torch_version")
image_torch=$(run python -c "$torch_version")
echo "torch: base $base_torch, image $image_torch"
[ "$base_torch" = "$image_torch" ] || fail "pip install . replaced the base's torch"
if [ -d data/image_folder ]; then  # the image-folder part's decoder (an optional part)
    run python -c 'from data.image_folder.photos import jpeg_decoder; print("torchcodec:", "loads" if jpeg_decoder() else "falls back to PIL")'  # an optional part
fi
if [ -d app/serve ]; then run python -m app serve --help >/dev/null; fi  # an optional part: LitServe in the image
uid=$(run id -u)
echo "user: uid $uid"
[ "$uid" != 0 ] || fail "the image runs as root"

run "${entrypoint[@]}" --help >/dev/null
run "${entrypoint[@]}" "${cmd[@]}" --print_config >/dev/null # the CMD parses (its MNIST needs a download)
run "${entrypoint[@]}" fit --config configs/fashion_mnist.yaml --trainer.max_epochs 1 \
    --trainer.limit_train_batches 20 --trainer.limit_val_batches 5 --trainer.limit_test_batches 5 \
    --data.num_workers 1
checkpoint=$(run sh -c 'ls -d runs/*/version_*/checkpoints/last.ckpt' | tail -1)
run "${entrypoint[@]}" export --ckpt_path "$checkpoint" --format torchscript
model=$(dirname "$(dirname "$checkpoint")")/model.pt
run python -c "import torch; print('exported model: probabilities', tuple(torch.jit.load('$model')(torch.zeros(2, 1, 28, 28, dtype=torch.uint8)).shape))"

# Several machines run `--entrypoint torchrun` with their rendezvous arguments; one machine with 2 CPU
# processes, --standalone on a free port, runs the same path (a minute); `timeout` makes a hang a failure.
run timeout 300 torchrun --standalone --nproc_per_node 2 -m app fit --config configs/fashion_mnist.yaml \
    --trainer.devices 2 --trainer.strategy ddp --trainer.max_epochs 1 --trainer.limit_train_batches 5 \
    --trainer.limit_val_batches 2 --trainer.limit_test_batches 2 --trainer.logger CSVLogger \
    --trainer.enable_progress_bar false --data.num_workers 0 \
    || fail "torchrun's fit failed, or did not end within 300 s"

ddp_run=$(run sh -c 'ls -d runs/*/version_*' | tail -1)

rm -rf "$WORK/out" && mkdir -p "$WORK/out"
cp -r "$(buildah mount "$ctr")/app/runs" "$WORK/out/runs"
buildah umount "$ctr" >/dev/null
echo "run folder: $WORK/out/$(dirname "$(dirname "$checkpoint")")"
echo "torchrun's run folder: $WORK/out/$ddp_run"
echo "build: ${build_s} s, run: $((SECONDS - started)) s"
echo "docker-smoke: OK"
