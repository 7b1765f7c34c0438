#!/usr/bin/env bash
# The real service on a GPU host: Redis from Debian's .deb, the web app
# (gunicorn, DJANGO_DEBUG=0), the web-queue Celery worker (with beat) and a GPU Celery worker,
# each in its own session (setsid) so that they outlive the device call that started them; a
# benchmark applied from YAML (manage.py bench_apply); one batch triggered through the JSON API
# with a token; then polled, and the results copied to $OUT.
#
#   bash benchmarks/gpu/service_on_gpu.sh prepare   # copy the app, start the random-weight model
#   bash benchmarks/gpu/service_on_gpu.sh start     # after install_wheelhouse.sh: services + trigger
#   bash benchmarks/gpu/service_on_gpu.sh trigger [REF]  # one more batch (at REF: a git engine's ref)
#   bash benchmarks/gpu/service_on_gpu.sh wait [S]  # poll up to S s (default 500), then collect
#   bash benchmarks/gpu/service_on_gpu.sh collect   # copy results, pages and log tails to $OUT
#   bash benchmarks/gpu/service_on_gpu.sh stop      # stop what start started
#
# Everything is set by SVC_* variables (defaults for the 2 x H200 host; SVC_VARIANTS=a,b triggers
# only those variants, by name; a benchmark whose YAML has `engine: {repo: URL}` builds vLLM from
# that repository at SVC_REF, a branch, tag or commit, which it needs); the CPU rehearsal of
# the same script is in docs/gpu-host.md.
set -euo pipefail
MODE=${1:-start}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
SVC=${SVC_DIR:-/tmp/svc}
APP=$SVC/app
VAR=$SVC/var
PY=${SVC_PYTHON:-python3}
SITE=${SVC_SITE-/tmp/vllm-site}             # empty: the interpreter's own packages
REDIS=${SVC_REDIS_SERVER:-/tmp/redis/run-redis-server}
REDIS_PORT=${SVC_REDIS_PORT:-6379}
REDIS_DB=${SVC_REDIS_DB:-0}
WEB_PORT=${SVC_WEB_PORT:-8000}
YAML=${SVC_YAML:-$REPO/benchmarks/gpu/service-h200x2.yaml}
TOKENIZER=${SVC_TOKENIZER:-$REPO/.gpu-carry/tokenizer}
SHAPE=${SVC_MODEL_SHAPE:-llama-8b}
OUTDIR=${OUT:-$SVC/out}
mkdir -p "$SVC" "$VAR/logs"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$SVC/steps.log"; }

# The environment every service process gets. NVLink multicast stays off (the host's rule);
# vLLM runs offline on the carried site.
export PYTHONPATH=$APP${SITE:+:$SITE}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export DATABASE_URL=sqlite:///$VAR/db.sqlite3 BENCH_VAR_DIR=$VAR BENCH_WORK_DIR=$VAR/work
export CELERY_BROKER_URL=redis://127.0.0.1:$REDIS_PORT/$REDIS_DB
export CELERY_RESULT_BACKEND=$CELERY_BROKER_URL
export DJANGO_DEBUG=0 DJANGO_SECRET_KEY=${DJANGO_SECRET_KEY:-gpu-host-$(hostname)-not-public}
export DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost DJANGO_SECURE_SSL_REDIRECT=0 DJANGO_SECURE_COOKIES=0
export DJANGO_HSTS_SECONDS=0 DJANGO_BEHIND_TLS_PROXY=0 BENCH_PUBLIC_URL=http://127.0.0.1:$WEB_PORT
if [ -n "${SVC_VLLM_COMMAND-python3 -m vllm.entrypoints.cli.main}" ]; then
  export BENCH_VLLM_COMMAND=${SVC_VLLM_COMMAND-python3 -m vllm.entrypoints.cli.main}
else
  unset BENCH_VLLM_COMMAND  # the interpreter's own vllm (the CPU rehearsal)
fi
URL=http://127.0.0.1:$WEB_PORT
manage() { (cd "$APP" && "$PY" manage.py "$@"); }

# The benchmark file as applied here: SVC_MODEL replaces its model (the CPU rehearsal's tiny one).
bench_field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$SVC/bench.json" "$1"; }

spawn() {  # NAME CMD...: its own session, its log under var/logs, its pid (= session and group) kept
  local name=$1; shift
  rm -f "$SVC/$name.pid"
  # setsid may fork: the session leader writes its own pid, then becomes the command. The subshell
  # is redirected too: the shell waiting on it would keep a caller's output pipe open.
  (cd "$APP" && setsid bash -c 'echo $$ >"$0"; exec "$@"' "$SVC/$name.pid" "$@" &) >"$VAR/logs/$name.log" 2>&1 </dev/null
  local i; for i in $(seq 50); do [ -s "$SVC/$name.pid" ] && break; sleep 0.1; done
  say "started $name (pid $(cat "$SVC/$name.pid")): $*"
}

alive() { [ -f "$SVC/$1.pid" ] && kill -0 "$(cat "$SVC/$1.pid")" 2>/dev/null; }

prepare() {
  say "copying the app to $APP"
  rm -rf "$APP"; mkdir -p "$APP"
  cp -r "$REPO"/benchsite "$REPO"/runners "$REPO"/templates "$REPO"/static "$REPO"/manage.py "$REPO"/pyproject.toml "$APP"/
  find "$APP" -name __pycache__ -prune -exec rm -rf {} +
  "$PY" - "$YAML" "$SVC/bench.json" <<'EOF'
import json, os, sys, yaml
data = yaml.safe_load(open(sys.argv[1]))
bench = data["benchmarks"][0]
if os.environ.get("SVC_MODEL"):
    bench["model"] = os.path.abspath(os.environ["SVC_MODEL"])
json.dump(bench, open(sys.argv[2], "w"), indent=1)
with open(os.path.join(os.path.dirname(sys.argv[2]), "bench.yaml"), "w") as f:
    yaml.safe_dump(data, f, sort_keys=False)
EOF
  local model; model=$(bench_field model)
  if [ -f "$model/config.json" ]; then
    say "model present: $model"
  elif ! alive model; then
    [ -d "$TOKENIZER" ] || { echo "no tokenizer at $TOKENIZER (carry .gpu-carry/tokenizer)" >&2; exit 2; }
    rm -rf "$SVC/tokenizer"; cp -r "$TOKENIZER" "$SVC/tokenizer"
    spawn model "$PY" -m runners random-model "$model" --shape "$SHAPE" --tokenizer-from "$SVC/tokenizer"
  fi
}

wait_for() {  # SECONDS DESCRIPTION COMMAND...: poll until the command succeeds
  local limit=$1 what=$2; shift 2
  local t0=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS - t0 > limit )); then say "FAILED: $what not ready within $limit s"; return 1; fi
    sleep 1
  done
  say "$what ready after $((SECONDS - t0)) s"
}

redis_ping() { "$PY" -c "import redis,sys; sys.exit(0 if redis.Redis(port=int(sys.argv[1])).ping() else 1)" "$REDIS_PORT"; }
web_up() { "$PY" -c "import httpx,sys; httpx.get(sys.argv[1] + '/', timeout=3).raise_for_status()" "$URL"; }
worker_ready() { grep -q "ready\.$" "$VAR/logs/$1.log"; }
model_done() { ! alive model; }

start() {
  [ -f "$SVC/bench.json" ] || prepare
  if alive redis; then :
  elif redis_ping >/dev/null 2>&1; then
    say "FAILED: port $REDIS_PORT already has a Redis this script did not start (set SVC_REDIS_PORT)"; exit 3
  else
    spawn redis "$REDIS" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$VAR"
  fi
  wait_for 30 "redis on port $REDIS_PORT" redis_ping
  say "migrate (SQLite at $VAR/db.sqlite3), collectstatic"
  manage migrate --noinput >"$VAR/logs/migrate.log" 2>&1 || { tail -30 "$VAR/logs/migrate.log"; exit 3; }
  manage collectstatic --noinput >>"$VAR/logs/migrate.log" 2>&1
  DJANGO_SUPERUSER_PASSWORD=${SVC_PASSWORD:-bench-gpu} manage createsuperuser --noinput --username bench \
    --email bench@localhost >/dev/null 2>&1 || true
  manage bench_apply "$SVC/bench.yaml"
  local slug pool
  slug=$(bench_field slug); pool=$(bench_field gpu_pool)
  manage api_token_create bench "gpu-ladder-$(date +%s)" >"$SVC/token"
  local celery=("$PY" -m celery -A benchsite worker -l INFO --without-gossip)
  if ! alive web && web_up >/dev/null 2>&1; then say "FAILED: $URL already answers (another web server; set SVC_WEB_PORT)"; exit 3; fi
  alive web || spawn web "$PY" -m gunicorn benchsite.wsgi --bind "127.0.0.1:$WEB_PORT" --workers 2 --timeout 120
  alive worker-web || spawn worker-web "${celery[@]}" -Q web -c 2 -n "web@%h" -B --schedule "$VAR/celerybeat-schedule"
  alive worker-gpu || spawn worker-gpu "${celery[@]}" -Q "gpu.$pool" -c 1 -n "gpu-$pool@%h"
  wait_for 60 "web on $URL" web_up
  wait_for 90 "web-queue worker" worker_ready worker-web
  wait_for 90 "GPU worker (queue gpu.$pool)" worker_ready worker-gpu
  if alive model; then wait_for 240 "random-weight model" model_done; fi
  local model; model=$(bench_field model)
  [ -f "$model/config.json" ] || { say "FAILED: no model at $model"; tail -20 "$VAR/logs/model.log" 2>/dev/null; exit 4; }
  trigger "${SVC_REF:-}"
}

trigger() {  # [REF]: one batch through the JSON API; a git engine's benchmark needs REF
  local slug; slug=$(bench_field slug)
  say "triggering $slug${1:+ at $1} through the JSON API"
  "$PY" - "$URL" "$slug" "$SVC/token" "$SVC/trigger.json" "${SVC_VARIANTS:-}" "${1:-}" "$SVC/bench.json" <<'EOF'
import json, re, sys, time, httpx
url, slug, token_file, out, variants, ref, bench = sys.argv[1:]
engine = json.load(open(bench)).get("engine")
if engine and not ref:
    sys.exit(f"benchmark {slug} builds vLLM from {engine['repo']}: give the ref to run "
             "(SVC_REF=<branch, tag or commit>, or: trigger REF)")
token = open(token_file).read().strip()
body = {"benchmark": slug, **({"variants": variants.split(",")} if variants else {})}  # default: the whole ladder
if ref:  # a full SHA runs that commit (reported against it, like a push); else the worker resolves the ref
    body["commit" if re.fullmatch(r"[0-9a-f]{40}", ref) else "ref"] = ref
for _ in range(30):  # 409: the GPU worker just started and its first pool heartbeat is still on its way
    r = httpx.post(url + "/api/runs/", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    if r.status_code != 409:
        break
    time.sleep(2)
if r.status_code != 201:
    sys.exit(f"trigger refused: {r.status_code} {r.text}")
open(out, "w").write(r.text)
for run in r.json()["runs"]:
    print(f"  run {run['id']} [{run['variant']}] {run['state']}{' at ' + ref if ref else ''} {run['url']}")
EOF
  say "triggered; dashboard $URL/b/$slug/"
}

poll() {  # prints one line per run; exit 0 when every run of the batch is final
  "$PY" - "$URL" "$SVC/trigger.json" <<'EOF'
import json, sys, httpx
url, trigger = sys.argv[1:]
ids = [r["id"] for r in json.load(open(trigger))["runs"]]
final = True
for i in ids:
    s = httpx.get(f"{url}/api/runs/{i}/", timeout=10).json()
    m = {x["metric"]: x["value"] for x in s.get("measurements", [])}
    tok = f" {m['decode_tok_s']:.1f} tok/s" if "decode_tok_s" in m else ""
    err = f" error: {s['error'].splitlines()[0][:160]}" if s.get("error") else ""
    at = f" {s['commit'][:12]}" if s.get("commit") else ""
    print(f"  run {i} [{s['variant']['name']}]{at} {s['state']} {s['phase']}{tok}{err}")
    final = final and s["is_final"]
sys.exit(0 if final else 1)
EOF
}

collect() {
  mkdir -p "$OUTDIR"
  say "collecting into $OUTDIR"
  local slug; slug=$(bench_field slug)
  # Runs as the database holds them (measurements with samples and flags, took_effect, host).
  manage shell -c "
import json
from benchsite.bench.models import Run
from benchsite.bench.pages.runpage import run_live
ids = [r['id'] for r in json.load(open('$SVC/trigger.json'))['runs']]
out = []
for run in Run.objects.filter(id__in=ids).order_by('id'):
    live = run_live(run=run)
    live.pop('log_tail', None)
    live['took_effect'] = run.took_effect
    live['host_info'] = run.host_info
    live['measurement_details'] = {m.metric: m.details for m in run.measurements.all()}
    out.append(live)
open('$OUTDIR/runs.json', 'w').write(json.dumps({'runs': out}, indent=1, default=str))
" >"$VAR/logs/collect.log" 2>&1 || tail -5 "$VAR/logs/collect.log"
  "$PY" - "$URL" "$slug" "$SVC/trigger.json" "$OUTDIR" "$VAR" <<'EOF'
import io, json, pathlib, sys, tarfile, httpx
url, slug, trigger, out, var = sys.argv[1:]
ids = [r["id"] for r in json.load(open(trigger))["runs"]]
out, var = pathlib.Path(out), pathlib.Path(var)
pathlib.Path(out / "benchmark.html").write_text(httpx.get(f"{url}/b/{slug}/", timeout=30).text)
with tarfile.open(out / "pages.tar.gz", "w:gz") as tar:
    def add(name, data):
        info = tarfile.TarInfo(name); info.size = len(data); tar.addfile(info, io.BytesIO(data))
    add("api-runs.json", httpx.get(f"{url}/api/runs/", params={"benchmark": slug}, timeout=30).content)
    for path in (f"/b/{slug}/waterfall/",):
        add("waterfall.html", httpx.get(url + path, timeout=30).content)
    for i in ids:
        add(f"run-{i}.html", httpx.get(f"{url}/runs/{i}/", timeout=30).content)
        add(f"run-{i}-spec.json", httpx.get(f"{url}/runs/{i}/spec.json", timeout=30).content)
    # The artifacts the web side stored (server logs with the NCCL lines, probe JSON); profiler
    # traces over 4 MB stay behind, and a longer log keeps its first 3 MB (start-up: the evidence)
    # and its last 1 MB.
    for f in sorted((var / "artifacts").rglob("*")):
        if not f.is_file():
            continue
        name, size = "artifacts/" + str(f.relative_to(var / "artifacts")), f.stat().st_size
        if size < 4 * 2**20:
            tar.add(f, arcname=name)
        elif f.name.endswith(".log"):
            with open(f, "rb") as fh:
                head = fh.read(3 * 2**20); fh.seek(size - 2**20); tail = fh.read()
            add(name, head + f"\n[... {size - len(head) - len(tail)} bytes left out ...]\n".encode() + tail)
EOF
  {
    cat "$SVC/steps.log"
    for f in redis model migrate web worker-web worker-gpu collect; do
      [ -f "$VAR/logs/$f.log" ] || continue
      echo; echo "===== $f.log (last 300 lines of $(wc -l <"$VAR/logs/$f.log"))"; tail -300 "$VAR/logs/$f.log"
    done
  } >"$OUTDIR/logs.txt"
  ls -la "$OUTDIR"
}

wait_runs() {
  local limit=${1:-500} t0=$SECONDS last=""
  say "waiting up to $limit s for the batch"
  while true; do
    local now rc=0
    now=$(poll) || rc=$?
    [ "$now" = "$last" ] || { say "status:"; echo "$now" | tee -a "$SVC/steps.log"; last=$now; }
    if [ $rc -eq 0 ]; then say "every run is final"; break; fi
    for p in redis web worker-web worker-gpu; do alive $p || say "WARNING: $p is not running"; done
    if (( SECONDS - t0 > limit )); then say "deadline reached; the batch goes on"; break; fi
    sleep 10
  done
  collect
}

stop() {  # TERM each process group, KILL what is left after 30 s (gunicorn and Celery drain first)
  local p left
  for p in worker-gpu worker-web web redis model; do
    alive $p && kill -TERM -- "-$(cat "$SVC/$p.pid")" 2>/dev/null || true
  done
  for _ in $(seq 30); do
    left=""; for p in worker-gpu worker-web web redis model; do alive $p && left="$left $p"; done
    [ -z "$left" ] && break; sleep 1
  done
  for p in $left; do kill -KILL -- "-$(cat "$SVC/$p.pid")" 2>/dev/null || true; done
  say "stopped${left:+ (killed:$left)}"
}

case "$MODE" in
  prepare) prepare ;;
  start) start ;;
  trigger) trigger "${2:-${SVC_REF:-}}" ;;
  wait) wait_runs "${2:-500}" ;;
  collect) collect ;;
  stop) stop ;;
  *) echo "usage: $0 prepare|start|trigger [REF]|wait [S]|collect|stop" >&2; exit 2 ;;
esac
