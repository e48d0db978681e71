#!/usr/bin/env bash
# The GPU checks of mmvisattn, prepared for a fresh 1-GPU machine:
#   [WHEELHOUSE=DIR] [GPU_CHECK_PARTS="install gpu-tests op-tests benchmark demo"] \
#     bash tools/analysis_tools/gpu_check.sh [REPORT]        (default: work_dirs/gpu_report.txt)
# Parts, in the order they run (GPU_CHECK_PARTS picks some):
# install    the stack. With a package registry: tools/install.sh with MMCV_FORCE_CUDA=1, mmcv's
#            CUDA ops built for the visible GPU only. Without one (WHEELHOUSE, filled by
#            tools/analysis_tools/gpu_wheelhouse.sh): the carried wheels first, and after the
#            gpu-tests tools/build_mmcv.sh from the carried source release, time-boxed
#            (INSTALL_BUDGET seconds, default 420);
# gpu-tests  tests/test_cuda.py that needs no compiled ops (fp32/fp16/bf16 against the CPU, no
#            host sync, fused SDPA, torch.compile), run against mmcv's Python sources before a build;
# op-tests   tests/test_cuda.py on mmcv's ops under bf16 AMP and Cascade/UperNet --amp through
#            the tools;
# benchmark  mmvisattn's Swin-T against mmdet's (inference 2x3x800x1216, train step 8x3x512x512,
#            fp32 and AMP fp16/bf16, peak memory): benchmark_backbone.py;
# demo       20 demo iterations with and without --amp (tools/train.py on generated data).
# Without mmcv's CUDA ops the last three are skipped, and the report says so. Each section goes
# to REPORT with its command, exit code and seconds. A whole run does not fit one 10-minute
# call: on an H200 machine (2026-12-04) the wheels took 15 s, 28 of the 52 gpu-tests 155 s,
# and the mmcv build had not finished after 420 s (the gpu-tests ran beside it then). Run
# "install gpu-tests" first, then "op-tests benchmark demo" on the same machine while it still
# holds the build (docs/install.md#gpu-machines).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
REPORT=${1:-work_dirs/gpu_report.txt}
PARTS=" ${GPU_CHECK_PARTS:-install gpu-tests op-tests benchmark demo} "
mkdir -p "$(dirname "$REPORT")"
: > "$REPORT"
log() { echo "$*" | tee -a "$REPORT"; }
wants() { [[ $PARTS == *" $1 "* ]]; }
# section NAME BUDGET CMD...: runs CMD under `timeout BUDGET`, output into the report
section() {
  local name=$1 budget=$2; shift 2
  log ""; log "== $name (budget ${budget}s): $*"
  local start=$SECONDS
  timeout --kill-after=10 "$budget" "$@" 2>&1 | grep -v -i 'warn' | tail -n 60 | tee -a "$REPORT"
  local rc=${PIPESTATUS[0]}
  log "== $name: exit $rc after $((SECONDS - start))s$([ "$rc" = 124 ] && echo ' (time budget reached)')"
  return "$rc"
}
cuda_ops() { (cd / && $PY -c 'from mmcv.ops import get_compiling_cuda_version as v; print(v())') 2>/dev/null || echo none; }

log "gpu_check $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') parts:$PARTS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$REPORT"
$PY -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tee -a "$REPORT"
# the arch list from the visible GPU, so nothing is built for others
arch=$($PY -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null || echo "")
build_env=(env MMCV_FORCE_CUDA=1 TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}"
           MAX_JOBS="${MAX_JOBS:-$(nproc)}" PYTHON="$PY")
budget=${INSTALL_BUDGET:-420}
wheelhouse=""
if [ -n "${WHEELHOUSE:-}" ]; then
  wheelhouse=$(cd "$WHEELHOUSE" && pwd)
  export PIP_NO_INDEX=1 PIP_FIND_LINKS=$wheelhouse   # pip never looks for a registry
fi

# install: the wheels now, the mmcv build after the tests that need no compiled ops
if wants install && [ -n "$wheelhouse" ]; then
  # --no-deps: the image's own torch, numpy builds and opencv-python-headless stay (mmengine's
  # wheel asks for opencv-python, which would be a second cv2)
  section "install wheels" 180 bash -c "$PY -m pip install -q --disable-pip-version-check --no-deps $wheelhouse/*.whl \
    && $PY -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e ."
elif wants install; then
  section install "$budget" "${build_env[@]}" bash tools/install.sh
fi

# gpu-tests: the CUDA tests that need no compiled ops; before a build, against mmcv's Python
# sources
if wants gpu-tests; then
  mmcv_src=""
  if [ -n "$wheelhouse" ] && ! (cd / && $PY -c 'import mmcv') >/dev/null 2>&1; then
    mmcv_src=$(mktemp -d)
    tar -xzf "$wheelhouse"/mmcv-2.1.0.tar.gz -C "$mmcv_src"
    mmcv_src=$mmcv_src/mmcv-2.1.0
  fi
  section "gpu-tests (no compiled ops)" 300 env ${mmcv_src:+PYTHONPATH=$mmcv_src} \
    $PY -m pytest tests/test_cuda.py -q -rs --durations=5 -p no:cacheprovider \
    -k "not cascade and not mmcv_ops"
fi

# install, continued: the mmcv build from the carried source release, time-boxed
if wants install && [ -n "$wheelhouse" ]; then
  ops=$(cuda_ops)
  if [ "$ops" = none ] || [ "$ops" = "not available" ]; then
    # PIP_VERBOSE=2 against build_mmcv.sh's -q is pip -v, which shows the build's own output: the
    # report's tail then has ninja's progress ([done/total]) or the error
    section "mmcv build" "$budget" "${build_env[@]}" PIP_VERBOSE=2 bash tools/build_mmcv.sh
  fi
fi
ops=$(cuda_ops)
log "mmcv CUDA ops: $ops"
full=1
if [ "$ops" = none ] || [ "$ops" = "not available" ]; then
  full=0
  log "mmcv has no CUDA ops: no mmcv-op, detector or segmentor checks and no mmdet peer"
fi

# op-tests: the CUDA tests of mmcv's ops under AMP and of the tools
if wants op-tests && [ $full = 1 ]; then
  section "op-tests (mmcv ops, tools)" 300 $PY -m pytest tests/test_cuda.py -q -rs --durations=5 \
    -p no:cacheprovider -k "cascade or mmcv_ops"
fi

# benchmark: backbone speed and memory against mmdet's Swin-T (needs mmdet, hence mmcv's ops)
if wants benchmark && [ $full = 1 ]; then
  for dtype in float16 bfloat16; do
    section "benchmark $dtype" 150 $PY tools/analysis_tools/benchmark_backbone.py --device cuda \
      --infer-batch 2 --infer-shape 800 1216 --train-batch 8 --train-shape 512 512 \
      --repeats 3 --amp-dtype $dtype
  done
fi

# demo: the demo detector, 20 iterations with and without --amp
if wants demo && [ $full = 1 ]; then
  $PY tools/make_demo_data.py data/shapes >/dev/null 2>&1
  for amp in "" "--amp"; do
    section "demo 20 iterations ${amp:-fp32}" 120 $PY tools/train.py \
      configs/demo/cascade-mask-rcnn_swin-t_shapes.py --work-dir "work_dirs/gpu_demo${amp:+_amp}" $amp \
      --cfg-options train_cfg.max_iters=20 default_hooks.logger.interval=5 \
      default_hooks.checkpoint.interval=20
  done
fi
log ""; log "gpu_check done; report: $REPORT"
