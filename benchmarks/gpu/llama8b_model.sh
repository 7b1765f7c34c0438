#!/usr/bin/env bash
# On a GPU host: the Llama-8B-shaped random-weight model at /tmp/models/llama-8b, made from the
# tiny model's tokenizer in the carry (.gpu-carry/tokenizer), for the scripts beside this one.
#   bash benchmarks/gpu/llama8b_model.sh start DIR   # copy the code to DIR/app, start generating
#   bash benchmarks/gpu/llama8b_model.sh wait DIR    # wait until it is written (up to 4 minutes)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=/tmp/models/llama-8b
DIR=${2:?usage: $0 start|wait DIR}
case "$1" in
  start)
    rm -rf "$DIR/app"; mkdir -p "$DIR/app"
    cp -r "$REPO"/runners "$REPO"/benchmarks "$DIR/app"/
    cp -r "$REPO"/.gpu-carry/tokenizer "$DIR/tokenizer"
    # its own session: it outlives this call while the next parts of the carry travel
    cd "$DIR/app" && setsid nohup python3 -m runners random-model "$MODEL" --shape llama-8b \
      --tokenizer-from "$DIR/tokenizer" > "$DIR/model.log" 2>&1 < /dev/null &
    echo "[$(date +%H:%M:%S)] model generation started (log $DIR/model.log)" ;;
  wait)
    for _ in $(seq 1 120); do [ -f "$MODEL/model.safetensors" ] && ! pgrep -f "random-model" >/dev/null && break; sleep 2; done
    tail -3 "$DIR/model.log" ;;
  *) echo "usage: $0 start|wait DIR" >&2; exit 2 ;;
esac
