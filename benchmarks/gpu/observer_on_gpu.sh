#!/usr/bin/env bash
# On a GPU host with the carry of build_wheelhouse.sh: the observer-effect check
# (benchmarks/observer_effect.py: the probe's timed request against the request a user sends,
# alternating on one server), on the Llama-8B-shaped random model, CUDA graphs (vLLM's default).
#   bash benchmarks/gpu/observer_on_gpu.sh prepare   # first call: copy the code, start the model
#   bash benchmarks/gpu/observer_on_gpu.sh run       # after install_wheelhouse.sh install
# Env: OBS_TP (1), OBS_ROUNDS (12), OBS_TOKENS (256), OBS_ARGS (engine flags).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DIR=/tmp/obs
MODEL=/tmp/models/llama-8b
case "${1:-}" in
  prepare)
    bash "$REPO/benchmarks/gpu/llama8b_model.sh" start "$DIR" ;;
  run)
    bash "$REPO/benchmarks/gpu/llama8b_model.sh" wait "$DIR"
    nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
    cd "$DIR/app"
    PYTHONPATH=/tmp/vllm-site PYTHONUNBUFFERED=1 python3 benchmarks/observer_effect.py --model "$MODEL" \
      --tp "${OBS_TP:-1}" --rounds "${OBS_ROUNDS:-12}" --max-tokens "${OBS_TOKENS:-256}" \
      --engine-args "${OBS_ARGS:---max-model-len 2048 --max-num-seqs 4 --gpu-memory-utilization 0.5}" \
      --log "$DIR/vllm-serve.log" --json "${OUT:-$DIR}/observer.json" || status=$?
    [ -z "${OUT:-}" ] || tail -c 3000000 "$DIR/vllm-serve.log" > "$OUT/vllm-serve.log"
    exit "${status:-0}" ;;
  *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
