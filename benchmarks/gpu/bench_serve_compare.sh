#!/usr/bin/env bash
# On a GPU host with the carry installed (install_wheelhouse.sh) and the Llama-8B-shaped model:
# one `vllm serve`, then vLLM's own `vllm bench serve` and our decode probe against it, at
# concurrency 1 and 16 (prompt 128 tokens, 128 out), each printing its JSON under $OUT.
#   bash benchmarks/gpu/bench_serve_compare.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=${CMP_MODEL:-/tmp/models/llama-8b}
PORT=${CMP_PORT:-8011}
OUTDIR=${OUT:-/tmp/cmp}; mkdir -p "$OUTDIR"
export PYTHONPATH=/tmp/vllm-site HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
VLLM=(python3 -m vllm.entrypoints.cli.main)
setsid "${VLLM[@]}" serve "$MODEL" --port "$PORT" --max-model-len 2048 --max-num-seqs 16 \
  --gpu-memory-utilization 0.5 > "$OUTDIR/serve.log" 2>&1 &
server=$!
trap 'kill -- -$server 2>/dev/null' EXIT
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 1; done
echo "[$(date +%H:%M:%S)] server up"
for c in 1 16; do
  "${VLLM[@]}" bench serve --backend vllm --base-url "http://127.0.0.1:$PORT" --model "$MODEL" \
    --dataset-name random --random-input-len 128 --random-output-len 128 --ignore-eos \
    --num-prompts $((c * 4)) --max-concurrency "$c" --save-result --result-dir "$OUTDIR" \
    --result-filename "bench-serve-c$c.json" 2>&1 | grep -E "throughput|TPOT|ITL|TTFT" | head -12
  (cd "$REPO" && PYTHONPATH=$REPO python3 -m runners probe decode --base-url "http://127.0.0.1:$PORT" \
    --model "$MODEL" --max-tokens 128 --repeats 3 --concurrency "$c" --prompt-tokens 128 --json \
    > "$OUTDIR/probe-c$c.json") && python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); print('probe c$c', {k: d.get(k) for k in ('decode_tok_s','slowest_stream_tok_s','aggregate_tok_s')})" "$OUTDIR/probe-c$c.json"
done
