#!/usr/bin/env bash
# The GPU check of mmvisattn: one command on a fresh 1-GPU machine, at most GPU_CHECK_SECONDS
# (default 525) in all, its sections in priority order, each under its own time budget, one report:
#   [WHEELHOUSE=DIR] [GPU_CHECK_PARTS="install ops detector ..."] \
#     bash dev/gpu/gpu_check.sh [REPORT]         (default: work_dirs/gpu_report.txt)
# Each section's command, output tail, exit code and seconds go to REPORT; its whole output, and
# the probes' figures (JSON), beside it (REPORT without its extension, then _logs/).
# A section gets its budget, or what is left before the deadline; under 20 s left, it is not run
# and the report says so.
# Sections, in the order they run (GPU_CHECK_PARTS picks some: to rerun one on a fresh machine,
# GPU_CHECK_PARTS="install detector"), with their budgets; those of 1-4 add up to 515 s:
#  1 install     (45 s)  WHEELHOUSE's wheels (gpu_wheelhouse.sh) with --no-deps, the project in
#                        develop mode. With an mmcv wheel there: nothing is built. Without one:
#                        tools/build_mmcv.sh from the carried source release (INSTALL_BUDGET,
#                        default 420 s: then the rest does not fit). No WHEELHOUSE: tools/install.sh
#                        with mmcv's CUDA ops for the visible GPU (a registry, and a long build).
#    ops         (45 s)  tests/test_mmcv_ops.py: mmcv's CPU kernels against torchvision's; on
#                        CUDA, RoIAlign, nms, batched_nms and the deformable convolutions in fp32
#                        and under fp16 and bf16 autocast against the CPU, sigmoid focal loss
#                        against mmdet's Python version.
#  2 detector    (data 25 s, 4 runs x 45 s)  dev/gpu/gpu_train_probe.py: 20
#                        iterations, batch 2, fp16 AMP, images 800x1216 (the paper's largest
#                        training scale, fixed): the paper's Cascade Mask R-CNN Swin-T
#                        (configs/cascade_swin_t_coco.py) beside the same config with mmdet's
#                        SwinTransformer; mmdet's own Mask R-CNN Swin-T beside the same config with
#                        only type=mmvisattn.SwinTransformer. Seconds per iteration after 5 warm-up,
#                        peak memory, non-finite or skipped steps, the ratios. A run stops itself
#                        before its budget ends and reports the iterations it made.
#  3 segmentor   (data 15 s, 3 runs x 35 s)  the same for UperNet Swin-T at 512x512: our config
#                        and mmseg's own, then mmseg's with only type changed.
#  4 benchmark   (2 x 50 s)  benchmark_backbone.py --device cuda, fp16 then bf16 (inference
#                        2x3x800x1216, training step 8x3x512x512, repeats alternating the models).
#  5 precisions  (4 runs x 45 s)  the Cascade pair of 2 in bf16, then in fp32;
#    cuda-tests  (up to 240 s)  tests/test_cuda.py, with the time left.
# Sections 2-5 need CUDA and mmcv's CUDA ops; without them they are not run, and the report says
# so. GPU_CHECK_REHEARSAL=1 runs them on a machine without a GPU instead, tiny (images 96x144 and
# 64x64, 2 iterations, bf16 autocast for fp16, budgets x3): a check of the commands, not of the GPU.
# Planned from an H200 machine's timings: the wheels installed in 15 s; 28 CUDA tests took 155 s.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
REPORT=${1:-work_dirs/gpu_report.txt}
PARTS=" ${GPU_CHECK_PARTS:-install ops detector segmentor benchmark precisions cuda-tests} "
DEADLINE=${GPU_CHECK_SECONDS:-525}
LOGS=${REPORT%.*}_logs
DATA=${GPU_CHECK_DATA:-work_dirs/gpu_check_data}
BUDGET_SCALE=1
mkdir -p "$(dirname "$REPORT")" "$LOGS"
: > "$REPORT"
log() { echo "$*" | tee -a "$REPORT"; }
wants() { [[ $PARTS == *" $1 "* ]]; }
# section NAME BUDGET CMD...: CMD under `timeout`, with BUDGET or the time left before the
# deadline, whichever is less; GPU_CHECK_SECTION_END (Unix time) tells it when that is
section() {
  local name=$1 budget=$(($2 * BUDGET_SCALE)); shift 2
  local left=$((DEADLINE - SECONDS))
  [ "$left" -lt "$budget" ] && budget=$left
  log ""
  if [ "$budget" -lt 20 ]; then
    log "== $name: not run, ${left}s left before the ${DEADLINE}s deadline"
    return 124
  fi
  log "== $name (budget ${budget}s): $*"
  local start=$SECONDS file
  file=$LOGS/$(echo "$name" | tr -c 'A-Za-z0-9.\n-' _).log
  timeout --kill-after=5 "$budget" env GPU_CHECK_SECTION_END=$(($(date +%s) + budget)) "$@" 2>&1 \
    | tee "$file" | grep -v -E 'Warning:|warnings\.warn\(|paramwise_options' | tail -n "${TAIL:-30}" \
    | tee -a "$REPORT"
  local rc=${PIPESTATUS[0]}
  log "== $name: exit $rc after $((SECONDS - start))s$([ "$rc" = 124 ] && echo ' (time budget reached)')"
  return "$rc"
}
# probe NAME BUDGET CONFIG [OPTIONS]: gpu_train_probe.py, its figures in $LOGS/NAME.json
probe() {
  local name=$1 budget=$2; shift 2
  section "$name" "$budget" $PY dev/gpu/gpu_train_probe.py "$@" \
    --iters "$iters" --warmup "$warmup" --batch-size 2 --json "$LOGS/$name.json" \
    --work-dir "work_dirs/gpu_check/$name"
}

log "gpu_check $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') parts:$PARTS deadline ${DEADLINE}s"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$REPORT"
else
  log "no nvidia-smi"
fi
log "logs: $LOGS"

# 1. install: the carried wheels, never a build when one of them is mmcv's
wheelhouse=""
if [ -n "${WHEELHOUSE:-}" ]; then
  wheelhouse=$(cd "$WHEELHOUSE" && pwd)
  export PIP_NO_INDEX=1 PIP_FIND_LINKS=$wheelhouse   # pip never looks for a registry
fi
if wants install && [ -n "$wheelhouse" ]; then
  log "wheelhouse: $(ls "$wheelhouse" | wc -l) files, $(du -sh "$wheelhouse" | cut -f1);" \
      "mmcv: $(cd "$wheelhouse" && ls mmcv-* 2>/dev/null | tr '\n' ' ')"
  # --no-deps: the image's own torch, numpy builds and opencv-python-headless stay (mmengine's
  # wheel asks for opencv-python, which would be a second cv2)
  section "install wheels" 45 bash -c "$PY -m pip install -q --disable-pip-version-check --no-deps $wheelhouse/*.whl \
    && $PY -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e ."
  if ! ls "$wheelhouse"/mmcv-*.whl >/dev/null 2>&1; then
    arch=$($PY -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null || echo "")
    log "no mmcv wheel in $WHEELHOUSE: building it from the source release (this does not fit the plan)"
    section "mmcv build" "${INSTALL_BUDGET:-420}" env MMCV_FORCE_CUDA=1 \
      TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}" MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
      PYTHON="$PY" PIP_VERBOSE=2 bash tools/build_mmcv.sh
  fi
elif wants install; then
  section install "${INSTALL_BUDGET:-420}" env MMCV_FORCE_CUDA=1 PYTHON="$PY" bash tools/install.sh
fi
# one interpreter start: versions, whether CUDA is visible, mmcv's ops (their CUDA version or why
# they do not load)
mapfile -t status < <(cd / && $PY -c '
import sys
import torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda",
      torch.version.cuda, "available", torch.cuda.is_available())
print(int(torch.cuda.is_available()))
try:
    import mmcv.ops
    print(mmcv.ops.get_compiling_cuda_version())
except Exception as exc:
    print("none:", str(exc).splitlines()[0])
' 2>/dev/null)
log "${status[0]:-python/torch: torch does not import}"
cuda=${status[1]:-0}
ops=${status[2]:-none}
log "mmcv ops: CUDA $ops"
if [ "$cuda" = 1 ] && [[ $ops =~ ^[0-9]+\.[0-9]+$ ]]; then
  mode=gpu; fp16=float16; iters=20; warmup=5
  det_size=(800 1216); det_scale=(1333 800); seg_size=(512 512); seg_options=()
  bench=(--device cuda --infer-batch 2 --infer-shape 800 1216 --train-batch 8
         --train-shape 512 512 --repeats 5)
elif [ "${GPU_CHECK_REHEARSAL:-0}" = 1 ] && [ "$cuda" = 0 ]; then
  mode=rehearsal; fp16=bfloat16; iters=2; warmup=1; BUDGET_SCALE=3
  det_size=(96 144); det_scale=(144 96); seg_size=(64 64)
  seg_options=(--fixed-scale 64 64 --cfg-options "model.data_preprocessor.size=(64,64)")
  bench=(--device cpu --infer-batch 2 --infer-shape 64 64 --train-batch 2 --train-shape 64 64
         --repeats 1)
  log "rehearsal on the CPU: sections 2-5 tiny, bf16 autocast in place of fp16; no GPU figures"
else
  mode=none
  log "no CUDA GPU with mmcv's CUDA ops (GPU visible: $cuda): sections 2-5 (detector, segmentor," \
      "benchmark, precisions, cuda-tests) are not run"
fi
needs_gpu() { wants "$1" && [ "$mode" != none ]; }

# 1. ops: mmcv's kernels, the CPU against torchvision, CUDA against the CPU
if wants ops; then
  TAIL=40 section "ops (mmcv CPU and CUDA)" 45 $PY -m pytest tests/test_mmcv_ops.py -q -rs \
    -p no:cacheprovider
fi

# data, generated here, never shipped: COCO instances at the paper's training size, ADE 512x512
# (tools/make_demo_data.py: idempotent, one folder per size)
det_root() { echo "$DATA/coco-${det_size[0]}x${det_size[1]}"; }
seg_root() { echo "$DATA/ade-${seg_size[0]}x${seg_size[1]}"; }
det_data() {
  section "data: COCO-format ${det_size[0]}x${det_size[1]}" 25 $PY tools/make_demo_data.py \
    "$(det_root)" --num-train $((iters * 2)) --num-val 1 --size "${det_size[@]}"
}
seg_data() {
  section "data: ADE-format ${seg_size[0]}x${seg_size[1]}" 15 $PY tools/make_demo_data.py \
    "$(seg_root)" --num-train $((iters * 2)) --num-val 1 --size "${seg_size[@]}"
}
CASCADE=configs/cascade_swin_t_coco.py
MASK_RCNN=mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py
UPERNET=configs/swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py
MMSEG_UPERNET=mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
OURS=model.backbone.type=mmvisattn.SwinTransformer
# the Cascade pair in one dtype: ours, then mmdet's backbone with the ratio
cascade_pair() {
  local dtype=$1 budget=$2 det=(--data-root "$(det_root)" --fixed-scale "${det_scale[@]}")
  probe "cascade-ours-$1" "$budget" $CASCADE "${det[@]}" --amp-dtype "$dtype"
  probe "cascade-mmdet-$1" "$budget" $CASCADE "${det[@]}" --amp-dtype "$dtype" --mmdet-backbone \
    --against "$LOGS/cascade-ours-$1.json"
}

# 2. detector: the paper's config against mmdet's backbone, mmdet's config against ours
if needs_gpu detector; then
  log ""
  log "goals: ours/mmdet s/iter <= 0.8 and peak memory <= 0.8 under fp16 AMP; no non-finite or" \
      "skipped fp16 step"
  det_data
  cascade_pair "$fp16" 45
  det=(--data-root "$(det_root)" --fixed-scale "${det_scale[@]}" --amp-dtype "$fp16")
  probe "mask-rcnn-mmdet-$fp16" 45 $MASK_RCNN "${det[@]}"
  probe "mask-rcnn-ours-$fp16" 45 $MASK_RCNN "${det[@]}" --cfg-options $OURS \
    --against "$LOGS/mask-rcnn-mmdet-$fp16.json"
fi

# 3. segmentor: UperNet Swin-T, ours and mmseg's, then mmseg's with only type changed
if needs_gpu segmentor; then
  seg_data
  seg=(--data-root "$(seg_root)" --amp-dtype "$fp16" "${seg_options[@]}")
  probe "upernet-mmseg-$fp16" 35 $MMSEG_UPERNET "${seg[@]}"
  probe "upernet-ours-$fp16" 35 $UPERNET "${seg[@]}" --against "$LOGS/upernet-mmseg-$fp16.json"
  probe "upernet-mmseg-type-ours-$fp16" 35 $MMSEG_UPERNET "${seg[@]}" --cfg-options $OURS \
    --against "$LOGS/upernet-mmseg-$fp16.json"
fi

# 4. benchmark: the backbones alone
if needs_gpu benchmark; then
  for dtype in float16 bfloat16; do
    [ "$mode" = rehearsal ] && [ "$dtype" = float16 ] && continue
    section "benchmark $dtype" 50 $PY tools/analysis_tools/benchmark_backbone.py "${bench[@]}" \
      --amp-dtype $dtype
  done
fi

# 5. with the time left: the Cascade pair in bf16 and fp32, then the CUDA tests
if needs_gpu precisions; then
  det_data
  for dtype in bfloat16 float32; do
    [ "$mode" = rehearsal ] && [ "$dtype" = bfloat16 ] && continue  # ran as the fp16 stand-in
    cascade_pair $dtype 45
  done
fi
if needs_gpu cuda-tests; then
  TAIL=40 section "cuda-tests" 240 $PY -m pytest tests/test_cuda.py -v -rs --durations=5 \
    -p no:cacheprovider
fi
log ""; log "gpu_check done after ${SECONDS}s ($mode); report: $REPORT"
