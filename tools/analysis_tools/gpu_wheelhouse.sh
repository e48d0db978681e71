#!/usr/bin/env bash
# Fills DIR with what gpu_check.sh needs on a GPU machine that has no package registry (the
# machines lent here have none): wheels of the OpenMMLab packages and of the small dependencies a
# CUDA image lacks, for that machine's Python, and mmcv's source release, which is built there
# against its own torch and CUDA.
#   bash tools/analysis_tools/gpu_wheelhouse.sh [DIR] [PYTHON_VERSION]     (default: .whl 3.12)
# then, on the GPU machine:  WHEELHOUSE=DIR bash tools/analysis_tools/gpu_check.sh
# The image is expected to hold torch, torchvision, numpy, scipy, matplotlib, opencv (headless),
# pyyaml, rich, pytest and timm; the wheels are installed there without dependency resolution, so
# a package the image lacks and this list omits shows up as an ImportError in the report.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.whl}
PYV=${2:-3.12}
PY=${PYTHON:-python3}
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
$PY -m pip download -q --no-deps --no-binary=:all: -d "$DIR" mmcv==2.1.0
ls "$DIR"
