#!/usr/bin/env bash
# Installs the OpenMMLab 2.x stack that mmvisattn needs into the current Python, idempotently.
#   PYTHON=python3 bash tools/install.sh
# The ~13-minute mmcv build runs only when `import mmcv.ops` fails against the installed torch.
# GPU: install your CUDA torch/torchvision first and run with MMCV_FORCE_CUDA=1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
case $PY in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # absolute, links kept (venvs)
PIP="$PY -m pip --disable-pip-version-check"
PIPI="$PIP install -c $ROOT/requirements/constraints.txt"
MMCV_VERSION=2.1.0

# Checks run from / so that this checkout's own folder does not shadow the install.
have() { (cd / && $PY - "$@") <<'PYEOF' >/dev/null 2>&1
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
PYEOF
}

# Fast path: everything already importable and this checkout installed.
if have mmcv.ops mmdet mmseg mmpretrain.models mmvisattn pytest timm && [ "$(cd / && $PY -c 'import mmvisattn,os;print(os.path.realpath(os.path.dirname(mmvisattn.__file__)))')" = "$(realpath mmvisattn)" ]; then
  echo "[install] stack already present; nothing to do"
  exit 0
fi

echo "[install] build tools"
$PIPI -q -r requirements/build.txt

if ! have torch torchvision; then
  echo "[install] torch + torchvision"
  $PIPI -q -r requirements/torch.txt
fi

$PIPI -q "mmengine==0.10.7"

if ! have mmcv.ops; then
  echo "[install] building mmcv==$MMCV_VERSION with compiled ops from source (about 13 minutes on 2 cores)"
  work=$(mktemp -d)
  $PIP download -q --no-deps --no-binary=:all: --no-build-isolation --no-cache-dir -d "$work" "mmcv==$MMCV_VERSION"
  tar -xzf "$work"/mmcv-$MMCV_VERSION.tar.gz -C "$work"
  # torch>=2.10 headers require C++20; mmcv 2.1.0 hard-codes -std=c++17.
  sed -i 's/-std=c++14/-std=c++20/g; s/-std=c++17/-std=c++20/g' "$work/mmcv-$MMCV_VERSION/setup.py"
  (cd "$work/mmcv-$MMCV_VERSION" && \
    MMCV_WITH_OPS=1 FORCE_CUDA=${MMCV_FORCE_CUDA:-0} MAX_JOBS=${MAX_JOBS:-2} \
    $PIPI -q --no-build-isolation --no-deps --no-cache-dir .)
  rm -rf "$work"
  have mmcv.ops || { echo "[install] ERROR: mmcv.ops still does not import after the build" >&2; exit 1; }
fi

echo "[install] mmdet, mmseg, mmpretrain and friends"
$PIPI -q -r requirements/runtime.txt -r requirements/tests.txt
echo "[install] mmvisattn (editable)"
$PIPI -q --no-build-isolation --no-deps -e .
have mmcv.ops mmdet mmseg mmpretrain.models mmvisattn
echo "[install] done"
