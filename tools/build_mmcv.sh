#!/usr/bin/env bash
# Builds mmcv 2.1.0 with its compiled ops from the source release and installs the wheel.
#   PYTHON=python3 [MMCV_FORCE_CUDA=1] [MAX_JOBS=N] bash tools/build_mmcv.sh
# tools/install.sh calls it when mmcv.ops does not import (about 13 minutes on 2 cores);
# dev/gpu/gpu_check.sh calls it on GPU machines that have no package registry,
# where PIP_NO_INDEX=1 and PIP_FIND_LINKS (pip's own variables) point `pip download` at a
# carried copy of the source release. The wheel is installed only once it is built, so a
# failed build leaves any installed mmcv as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
PIP="$PY -m pip --disable-pip-version-check"
MMCV_VERSION=2.1.0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$PIP download -q --no-deps --no-binary=:all: --no-build-isolation --no-cache-dir -d "$work" "mmcv==$MMCV_VERSION"
tar -xzf "$work"/mmcv-$MMCV_VERSION.tar.gz -C "$work"
# torch>=2.10 headers require C++20; mmcv 2.1.0 hard-codes -std=c++17.
sed -i 's/-std=c++14/-std=c++20/g; s/-std=c++17/-std=c++20/g' "$work/mmcv-$MMCV_VERSION/setup.py"
(cd "$work/mmcv-$MMCV_VERSION" && \
  MMCV_WITH_OPS=1 FORCE_CUDA=${MMCV_FORCE_CUDA:-0} MAX_JOBS=${MAX_JOBS:-$(nproc 2>/dev/null || echo 2)} \
  $PIP wheel -q --no-build-isolation --no-deps --no-cache-dir -w "$work/dist" .)
$PIP install -q -c "$ROOT/requirements/constraints.txt" --no-deps --force-reinstall "$work"/dist/mmcv-*.whl
