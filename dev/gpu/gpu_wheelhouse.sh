#!/usr/bin/env bash
# Fills DIR with what gpu_check.sh needs on a GPU machine that has no package registry (the
# machines lent here have none): wheels of the OpenMMLab packages and of the small dependencies a
# CUDA image lacks, for that machine's Python, and mmcv: its prebuilt wheel with the compiled CPU
# and CUDA ops when MMCV_WHEELS (default ../shared/wheels, beside the checkout) holds one for that
# Python (mmcv-*-cpXY-*.whl), else its source release, which is then built there (minutes).
#   bash dev/gpu/gpu_wheelhouse.sh [DIR] [PYTHON_VERSION]     (default: .whl 3.12)
# then, on the GPU machine:  WHEELHOUSE=DIR bash dev/gpu/gpu_check.sh
# The image is expected to hold torch, torchvision, numpy, scipy, matplotlib, opencv (headless),
# pyyaml, rich, pytest and timm; the wheels are installed there without dependency resolution, so
# a package the image lacks and this list omits shows up as an ImportError in the report. A
# prebuilt mmcv wheel works only with the torch it was built against (its README says which).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.whl}
PYV=${2:-3.12}
PY=${PYTHON:-python3}
MMCV_WHEELS=${MMCV_WHEELS:-../shared/wheels}
mkdir -p "$DIR"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64; do platforms+=(--platform "$p"); done
# the pins of requirements/runtime.txt and constraints.txt, and what those packages import
$PY -m pip download -q --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
  "${platforms[@]}" -d "$DIR" \
  mmengine==0.10.7 mmdet==3.3.0 mmsegmentation==1.2.2 mmpretrain==1.2.0 \
  addict yapf platformdirs termcolor terminaltables pycocotools shapely prettytable wcwidth \
  ftfy mat4py model-index ordered-set "numpy<2.4" "setuptools<81"
shopt -s nullglob
prebuilt=("$MMCV_WHEELS"/mmcv-2.1.0-cp"${PYV//./}"-*.whl)
if [ ${#prebuilt[@]} -gt 0 ]; then
  # the wheel replaces the source release: gpu_check.sh then installs and never builds
  rm -f "$DIR"/mmcv-*.whl "$DIR"/mmcv-*.tar.gz
  cp "${prebuilt[0]}" "$DIR"/
else
  echo "no prebuilt mmcv wheel for Python $PYV in $MMCV_WHEELS: carrying the source release" >&2
  $PY -m pip download -q --no-deps --no-binary=:all: -d "$DIR" mmcv==2.1.0
fi
ls "$DIR"
du -sh "$DIR"
