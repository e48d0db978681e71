#!/usr/bin/env bash
# Installs the OpenMMLab 2.x stack that mmvisattn needs into the chosen Python, idempotently.
#   PYTHON=python3 bash tools/install.sh
# Every run checks every requirements file against the environment (tools/check_requirements.py,
# about a second) and runs pip on a file whenever something in it is missing or at a wrong
# version, so a requirement added to a file is installed on the next `make test` / `make demo`
# on any machine. The expensive steps are skipped when satisfied: torch (when torch and
# torchvision import) and the ~13-minute mmcv build (when `import mmcv.ops` works against the
# installed torch).
# GPU: install your CUDA torch/torchvision first and run with MMCV_FORCE_CUDA=1: an mmcv
# built without CUDA ops is then rebuilt with them (nvcc and a CUDA torch are checked first).
# A torch that is already installed is never replaced. MAX_JOBS (default: the number of
# cores) sets the build's parallel compiles.
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

# One import probe of the whole stack: prints "missing NAME" per module that does not
# import, "at PATH" for the mmvisattn that imports (the tests need this checkout's) and
# "found PATH" for the folder mmengine's own package lookup finds for it (what
# `read_base()` imports of mmvisattn.configs go through).
STACK="torch torchvision mmcv.ops mmdet mmseg mmpretrain.models mmvisattn"
probe() { (cd / && $PY - $STACK) <<'PYEOF' 2>/dev/null
import importlib, os, sys
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
    except Exception:
        print('missing', name)
    else:
        if name == 'mmvisattn':
            print('at', os.path.realpath(os.path.dirname(module.__file__)))
            from mmengine.utils import get_installed_path
            print('found', os.path.realpath(get_installed_path('mmvisattn')))
PYEOF
}
state=$(probe)
lacks() { for name in "$@"; do grep -qx "missing $name" <<<"$state" && return 0; done; return 1; }
changed=0
rebuild=0

# Lists what a requirements file lacks here; fails if anything.
missing() { (cd / && $PY "$ROOT/tools/check_requirements.py" "${@/#/$ROOT/}"); }

if ! missing requirements/build.txt; then
  echo "[install] build tools"
  $PIPI -q -r requirements/build.txt
  changed=1
fi

pinned() { sed -n "s/^$1==\([^ ;#]*\).*/\1/p" requirements/torch.txt; }
if lacks torch; then
  echo "[install] torch + torchvision"
  $PIPI -q -r requirements/torch.txt
  changed=1
elif lacks torchvision; then
  # never reinstall torch over the user's (a CUDA build, say): only the torchvision
  # that is known to match, or a clear stop
  have_torch=$( (cd / && $PY -c 'import torch; print(torch.__version__.split("+")[0])') )
  if [ "$have_torch" = "$(pinned torch)" ]; then
    echo "[install] torchvision (for the installed torch $have_torch)"
    $PIPI -q --no-deps "torchvision==$(pinned torchvision)"
    changed=1
  else
    echo "[install] ERROR: torch $have_torch is installed but torchvision is not; install the" \
         "torchvision release that matches it (https://pytorch.org/get-started/previous-versions/)" \
         "and rerun. This script does not replace an installed torch." >&2
    exit 1
  fi
fi

# MMCV_FORCE_CUDA=1: CUDA ops are wanted; a CPU-only mmcv.ops counts as missing.
force_cuda=${MMCV_FORCE_CUDA:-0}
if [ "$force_cuda" = 1 ]; then
  torch_cuda=$( (cd / && $PY -c 'import torch; print(torch.version.cuda or "")') )
  if [ -z "$torch_cuda" ]; then
    echo "[install] ERROR: MMCV_FORCE_CUDA=1 but this torch has no CUDA (torch.version.cuda is" \
         "None); install a CUDA torch first" >&2
    exit 1
  fi
  nvcc=${CUDA_HOME:+$CUDA_HOME/bin/}nvcc
  if ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "[install] ERROR: MMCV_FORCE_CUDA=1 but no nvcc ($nvcc) to build mmcv's CUDA ops;" \
         "install the CUDA toolkit $torch_cuda and set CUDA_HOME" >&2
    exit 1
  fi
  if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ] && \
     [ "$( (cd / && $PY -c 'import torch; print(torch.cuda.is_available())') )" != True ]; then
    echo "[install] ERROR: MMCV_FORCE_CUDA=1 with no GPU visible: set TORCH_CUDA_ARCH_LIST to the" \
         "GPUs' compute capability (for example 9.0 for H100/H200), or build on the GPU machine" >&2
    exit 1
  fi
  built_with=$( (cd / && $PY -c 'from mmcv.ops import get_compiling_cuda_version as v; print(v())') 2>/dev/null || true)
  if [ -n "$built_with" ] && [ "$built_with" = "not available" ]; then
    echo "[install] the installed mmcv.ops has no CUDA ops: rebuilding with MMCV_FORCE_CUDA=1" \
         "(the installed mmcv stays until the new one is built)"
    rebuild=1
  fi
fi

if [ $rebuild = 1 ] || { lacks mmcv.ops && ! have mmcv.ops; }; then
  changed=1
  $PIPI -q "mmengine==0.10.7"
  echo "[install] building mmcv==$MMCV_VERSION with compiled ops from source (about 13 minutes on 2 cores; CUDA ops: $force_cuda)"
  MMCV_FORCE_CUDA=$force_cuda PYTHON="$PY" bash "$ROOT/tools/build_mmcv.sh"
  have mmcv.ops || { echo "[install] ERROR: mmcv.ops still does not import after the build" >&2; exit 1; }
fi

# Every requirements file but the pins (constraints.txt), torch.txt (checked by import
# above) and mim.txt (below).
files=()
for f in requirements/*.txt; do
  case $f in */constraints.txt|*/torch.txt|*/mim.txt) ;; *) files+=("$f") ;; esac
done
if ! missing "${files[@]}"; then
  echo "[install] requirements (installs only what is missing)"
  $PIPI -q "${files[@]/#/-r}"
  changed=1
fi
# openmim without its dependencies (requirements/mim.txt says why; tests.txt has
# what `mim` imports)
if ! missing requirements/mim.txt; then
  echo "[install] openmim"
  $PIPI -q --no-deps -r requirements/mim.txt
  changed=1
fi

# mmvisattn, editable, in setuptools' "develop" layout: the metadata
# (mmvisattn.egg-info) beside the package in this checkout, mmvisattn.egg-link and a
# line of easy-install.pth in site-packages. pkg_resources, and so mmengine's own
# package lookup (get_installed_path), finds the package in this checkout, so
# `with read_base(): from mmvisattn.configs... import *` works under stock mmengine,
# as in a regular install. A PEP 660 editable install (`pip install -e .`) keeps its
# metadata in site-packages, where mmengine looks for a site-packages/mmvisattn
# folder that does not exist. pip lists, shows and uninstalls this layout.
develop_install() {
  site=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  $PIP uninstall -y -q mmvisattn >/dev/null 2>&1 || true  # any earlier install
  if [ -f "$site/mmvisattn.egg-link" ]; then  # another checkout's, if pip left it
    old=$(head -n1 "$site/mmvisattn.egg-link")
    if [ -f "$site/easy-install.pth" ]; then
      { grep -vxF "$old" "$site/easy-install.pth" || true; } > "$site/easy-install.pth.new"
      mv "$site/easy-install.pth.new" "$site/easy-install.pth"
    fi
  fi
  (cd "$ROOT" && $PY setup.py -q egg_info >/dev/null 2>&1)
  printf '%s\n.\n' "$ROOT" > "$site/mmvisattn.egg-link"
  touch "$site/easy-install.pth"
  grep -qxF "$ROOT" "$site/easy-install.pth" || echo "$ROOT" >> "$site/easy-install.pth"
}
here=$(realpath mmvisattn)
if ! grep -qx "at $here" <<<"$state" || ! grep -qx "found $here" <<<"$state"; then
  echo "[install] mmvisattn (editable, this checkout)"
  develop_install
  changed=1
fi
# nothing installed: the probe above already imported the whole stack
[ $changed = 0 ] && ! lacks $STACK || have $STACK || {
  echo "[install] ERROR: the stack does not import; run: $PY -c 'import ${STACK// /, }'" >&2
  exit 1
}
echo "[install] done"
