#!/usr/bin/env bash
# The GPU checks of mmvisattn in one prepared run that fits ~9 minutes on a fresh 1-GPU machine:
#   bash tools/analysis_tools/gpu_check.sh [REPORT]      (default: work_dirs/gpu_report.txt)
# 1. installs the stack with mmcv's CUDA ops (tools/install.sh, MMCV_FORCE_CUDA=1), time-boxed
#    (INSTALL_BUDGET seconds, default 300); if the build does not finish, the checks that need
#    no compiled ops (backbones, attention, compile, sync) still run, and the report says so;
# 2. runs tests/test_cuda.py (fp32/fp16/bf16 against the CPU, no host sync, fused SDPA,
#    torch.compile, Cascade/UperNet --amp through the tools);
# 3. times mmvisattn's Swin-T against mmdet's (inference 2x3x800x1216, train step 8x3x512x512,
#    fp32 and AMP fp16/bf16, peak memory): tools/analysis_tools/benchmark_backbone.py;
# 4. times 20 demo iterations with and without --amp (tools/train.py on generated data);
# 5. writes everything to REPORT, each section with its command, exit code and seconds.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
REPORT=${1:-work_dirs/gpu_report.txt}
mkdir -p "$(dirname "$REPORT")"
: > "$REPORT"
log() { echo "$*" | tee -a "$REPORT"; }
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

log "gpu_check $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$REPORT"
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tee -a "$REPORT"

# 1. install (CUDA ops); the arch list from the visible GPU, so nothing is built for others
arch=$($PY -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null || echo "")
section install "${INSTALL_BUDGET:-300}" env MMCV_FORCE_CUDA=1 TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}" \
  MAX_JOBS="${MAX_JOBS:-$(nproc)}" PYTHON="$PY" bash tools/install.sh
ops=$($PY -c 'from mmcv.ops import get_compiling_cuda_version as v; print(v())' 2>/dev/null || echo "none")
log "mmcv CUDA ops: $ops"
full=1
if [ "$ops" = none ] || [ "$ops" = "not available" ]; then
  full=0
  log "mmcv has no CUDA ops: backbone-only checks (no detector/segmentor runs, no mmdet peer)"
fi

# 2. the CUDA tests
if [ $full = 1 ]; then
  section tests 240 $PY -m pytest tests/test_cuda.py -q -rs -x --durations=5
else
  section tests 180 $PY -m pytest tests/test_cuda.py -q -rs -k "not cascade" --durations=5
fi

# 3. backbone speed and memory against mmdet's Swin-T (needs mmdet, hence mmcv)
if [ $full = 1 ]; then
  for dtype in float16 bfloat16; do
    section "benchmark $dtype" 120 $PY tools/analysis_tools/benchmark_backbone.py --device cuda \
      --infer-batch 2 --infer-shape 800 1216 --train-batch 8 --train-shape 512 512 \
      --repeats 5 --amp-dtype $dtype
  done
fi

# 4. the demo detector, 20 iterations with and without --amp
if [ $full = 1 ]; then
  $PY tools/make_demo_data.py data/shapes >/dev/null 2>&1
  for amp in "" "--amp"; do
    section "demo 20 iterations ${amp:-fp32}" 120 $PY tools/train.py \
      configs/demo/cascade-mask-rcnn_swin-t_shapes.py --work-dir "work_dirs/gpu_demo${amp:+_amp}" $amp \
      --cfg-options train_cfg.max_iters=20 default_hooks.logger.interval=5 \
      default_hooks.checkpoint.interval=20
  done
fi
log ""; log "gpu_check done; report: $REPORT"
