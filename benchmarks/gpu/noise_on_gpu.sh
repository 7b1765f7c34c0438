#!/usr/bin/env bash
# On a GPU host with the carry of build_wheelhouse.sh: benchmarks/engine_noise.py on the
# Llama-8B-shaped random model: per engine start and per repeat, the probe's window rate, the
# whole stream's, the engine's own ITL and a plain client, free and pinned; raw streams as fixtures.
#   bash benchmarks/gpu/noise_on_gpu.sh prepare   # first call: copy the code, start the model
#   bash benchmarks/gpu/noise_on_gpu.sh run       # after install_wheelhouse.sh install
# Env: NOISE_STARTS (2), NOISE_REPEATS (4), NOISE_TOKENS (256), NOISE_ARGS (engine flags),
#      NOISE_LABEL (eager), NOISE_FLAGS (extra engine_noise.py flags, e.g. "--pin --held-back").
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DIR=/tmp/noise
MODEL=/tmp/models/llama-8b
case "${1:-}" in
  prepare)
    lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|NUMA|Model name)" || true
    bash "$REPO/benchmarks/gpu/llama8b_model.sh" start "$DIR" ;;
  run)
    bash "$REPO/benchmarks/gpu/llama8b_model.sh" wait "$DIR"
    rm -rf "$DIR/app"; mkdir -p "$DIR/app"; cp -r "$REPO"/runners "$REPO"/benchmarks "$DIR/app"/
    nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm,clocks.max.sm --format=csv,noheader
    cd "$DIR/app"
    label=${NOISE_LABEL:-eager}
    # shellcheck disable=SC2086  # NOISE_FLAGS is a list of flags
    PYTHONPATH=/tmp/vllm-site PYTHONUNBUFFERED=1 python3 benchmarks/engine_noise.py --model "$MODEL" \
      --starts "${NOISE_STARTS:-2}" --repeats "${NOISE_REPEATS:-4}" --max-tokens "${NOISE_TOKENS:-256}" \
      --engine-args "${NOISE_ARGS:---enforce-eager --max-model-len 2048 --max-num-seqs 4 --gpu-memory-utilization 0.5}" \
      --label "$label" --record "${OUT:-$DIR}/rec-$label" --json "${OUT:-$DIR}/noise-$label.json" \
      ${NOISE_FLAGS:-} 2>&1 | grep --line-buffered -v -E "^(INFO|DEBUG|\(APIServer)" || true ;;
  *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
