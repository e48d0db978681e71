#!/usr/bin/env bash
# Usage: [PYTHON=python GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SRUN_ARGS=...] \
#        tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py options]
set -x
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
CHECKPOINT=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
# The interpreter that runs the tools (the Makefile and the tests set it).
PYTHON=${PYTHON:-python}
PY_ARGS=${@:5}
GRES=""
[ "$GPUS_PER_NODE" -gt 0 ] && GRES="--gres=gpu:${GPUS_PER_NODE}" && \
    PER_NODE="--ntasks-per-node=${GPUS_PER_NODE}"

PYTHONPATH="$(dirname "$0")/..":${PYTHONPATH:-} \
srun -p ${PARTITION} \
    --job-name=${JOB_NAME} \
    ${GRES} \
    --ntasks=${GPUS} \
    ${PER_NODE:-} \
    --cpus-per-task=${CPUS_PER_TASK} \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    "$PYTHON" -u "$(dirname "$0")/test.py" ${CONFIG} ${CHECKPOINT} \
    --launcher="slurm" ${PY_ARGS}
