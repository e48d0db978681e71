#!/usr/bin/env bash
# Usage: [PYTHON=python] tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCS [test.py options]
CONFIG=$1
CHECKPOINT=$2
NPROCS=$3
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
# The interpreter that runs the tools (the Makefile and the tests set it).
PYTHON=${PYTHON:-python}
PYTHONPATH="$(dirname "$0")/..":${PYTHONPATH:-} \
"$PYTHON" -m torch.distributed.run --nnodes=$NNODES --node_rank=$NODE_RANK \
    --master_addr=$MASTER_ADDR --nproc_per_node=$NPROCS --master_port=$PORT \
    "$(dirname "$0")/test.py" $CONFIG $CHECKPOINT --launcher pytorch "${@:4}"
