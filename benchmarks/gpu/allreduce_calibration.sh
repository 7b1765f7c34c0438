#!/usr/bin/env bash
# In one device call (nvidia-h200-x2): the synthetic TP=2 step's A/B marginal
# cost per allreduce, the interleaved comm probe's prediction (a proxy of a few layers), the
# plain sweep's isolated figure, and the Llama-8B-shaped prediction of the real vLLM ladder's
# Simple-vs-LL cost (LLAMA_PROTOS=custom,LL,Simple with vLLM importable: also the custom-allreduce
# kernel, whose LL - custom difference predicts the ladder's 4.3 us); then a table. Results under $OUT.
#   bash benchmarks/gpu/allreduce_calibration.sh     # IL8=0 LLAMA=0 SWEEP=0 AB_FUSED=0 skip parts
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/calib}; mkdir -p "$O"
P="default,LL,LL128,Simple"
COMM="timeout 200 python3 -m runners comm --backend nccl --world-size 2 --protos $P --timeout-s 45"
nvidia-smi --query-gpu=name,memory.used,clocks.sm,clocks.mem --format=csv,noheader
t0=$(date +%s)
# The synthetic step's model: 78 layers of two 144 MiB blocks (what the service's probe runs: the
# model's depth), and the 8-layer proxy it replaced.
$COMM --mode interleaved --hidden-size 6144 --gemv-mb 144,144 --layers 78 --iters 60 --output "$O/il-model.json"
# The same proxy with the step's norm as separate torch ops: like for like with the A/B below.
$COMM --mode interleaved --hidden-size 6144 --gemv-mb 144,144 --layers 78 --iters 60 --norm ops --output "$O/il-model-ops.json"
[ "${IL8:-1}" = 1 ] && $COMM --mode interleaved --hidden-size 6144 --gemv-mb 144,144 --layers 8 --iters 100 --output "$O/il8.json"
echo "interleaved done at $(( $(date +%s) - t0 )) s"
timeout 300 python3 benchmarks/gpu/synthetic_step.py --layers 78 --hidden 6144 --shard 6144 --protos $P --rounds 12 \
    --timeout-s 70 --out "$O/ab.json"
echo "A/B done at $(( $(date +%s) - t0 )) s"
# The same step with one fused norm kernel (as vLLM's fused_add_rms_norm, and the probe's proxy)
[ "${AB_FUSED:-1}" = 1 ] && timeout 300 python3 benchmarks/gpu/synthetic_step.py --layers 78 --hidden 6144 --shard 6144 \
    --protos $P --rounds 12 --norm fused --timeout-s 70 --out "$O/ab-fused.json"
[ "${LLAMA:-1}" = 1 ] && timeout 150 python3 -m runners comm --backend nccl --world-size 2 --protos "${LLAMA_PROTOS:-default,LL,Simple}" --mode interleaved \
    --model-config benchmarks/gpu/llama-8b-config.json --iters 100 --timeout-s 45 --output "$O/il-llama8b.json"
[ "${SWEEP:-1}" = 1 ] && $COMM --sizes 12K --iters 100 --output "$O/sweep.json" >/dev/null
echo "measurements took $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/allreduce_calibration.py "$O"
