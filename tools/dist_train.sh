#!/usr/bin/env bash
# Usage: [PYTHON=python] tools/dist_train.sh CONFIG NUM_PROCS [train.py options]
CONFIG=$1
NPROCS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
# The interpreter that runs the tools (the Makefile and the tests set it).
PYTHON=${PYTHON:-python}
PYTHONPATH="$(dirname "$0")/..":${PYTHONPATH:-} \
"$PYTHON" -m torch.distributed.run --nnodes=$NNODES --node_rank=$NODE_RANK \
    --master_addr=$MASTER_ADDR --nproc_per_node=$NPROCS --master_port=$PORT \
    "$(dirname "$0")/train.py" $CONFIG --launcher pytorch "${@:3}"
