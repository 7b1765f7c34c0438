#!/usr/bin/env bash
# On a GPU host with vLLM installed by install_wheelhouse.sh: run some steps of a ladder.
#   bash benchmarks/gpu/run_ladder.sh LADDER.json ONLY [TOKENIZER_DIR]
# Generates the ladder's random-weight model on first use (tokenizer from the tiny model),
# merges results into /tmp/ladder-result.json and copies it to $OUT when that is set.
set -euo pipefail
LADDER=$1; ONLY=$2; TOK=${3:-.gpu-carry/tokenizer}
export PYTHONPATH=/tmp/vllm-site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
MODEL=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['benchmark']['model'])" "$LADDER")
if [ ! -f "$MODEL/model.safetensors" ]; then
  [ -d "$TOK" ] && cp -r "$TOK" /tmp/tokenizer
  time python3 -m runners random-model "$MODEL" --shape llama-8b --tokenizer-from /tmp/tokenizer
fi
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
python3 -m runners ladder "$LADDER" --out /tmp/ladder-result.json --only "$ONLY" --work-dir /tmp/ladder-work || true
if [ -n "${OUT:-}" ]; then
  cp /tmp/ladder-result.json "$OUT/"
  for log in /tmp/ladder-work/*/vllm-serve.log; do
    name=$(basename "$(dirname "$log")"); tail -c 2000000 "$log" > "$OUT/$name.log"
  done
fi
