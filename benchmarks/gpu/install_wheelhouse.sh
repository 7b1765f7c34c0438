#!/usr/bin/env bash
# On the GPU host (no network): gather the carry built by build_wheelhouse.sh, one part per
# device call, then unpack it: the Python site (vllm==0.24.0 + the service's deps) into TARGET
# and Debian's redis-server into /tmp/redis. /tmp/wh survives between calls while the machine
# is warm.
#   bash benchmarks/gpu/install_wheelhouse.sh add .gpu-carry/p1     # each call: its part
#   bash benchmarks/gpu/install_wheelhouse.sh install [WH] [TARGET]  # last call: unpack all
# then: export PYTHONPATH=TARGET (default /tmp/vllm-site); redis: /tmp/redis/run-redis-server.
# The older wheel-tar parts (part-* holding wheels/) still install with pip.
set -euo pipefail
say() { echo "[$(date +%H:%M:%S)] $*"; }
WH=${WH_DIR:-/tmp/wh}
PY=${PYTHON:-python3}
case "${1:-install}" in
  add)
    src=${2:?usage: add DIR}
    [ -d "$src" ] || { echo "no folder $src (was it in this call's carry?)" >&2; exit 2; }
    mkdir -p "$WH"; cp -r "$src"/. "$WH"/
    say "added $src: $(ls "$WH" | tr '\n' ' ')"
    exit 0 ;;
  install) WH=${2:-$WH}; T=${3:-/tmp/vllm-site} ;;
  *) WH=$1; T=${2:-/tmp/vllm-site} ;;  # the older form: install_wheelhouse.sh DIR [TARGET]
esac
cd "$WH"
ls part-* >/dev/null 2>&1 || { echo "no parts under $WH" >&2; exit 2; }
if [ -f SHA256SUMS ]; then
  missing=$(awk '{print $2}' SHA256SUMS | while read -r p; do [ -f "$p" ] || echo "$p"; done)
  [ -z "$missing" ] || { echo "missing parts: $missing (add them first)" >&2; exit 3; }
  sha256sum -c --quiet SHA256SUMS || { echo "checksum mismatch" >&2; exit 4; }
  say "parts verified: $(wc -l < SHA256SUMS)"
else
  echo "no SHA256SUMS: the last part was not added" >&2; exit 3
fi

deb_x() {  # dpkg -x, or the same with ar + tar where dpkg is missing
  if command -v dpkg >/dev/null; then dpkg -x "$1" "$2"; return; fi
  "$PY" - "$1" "$2" <<'EOF'
import io, sys, tarfile
data = open(sys.argv[1], "rb").read()
pos = 8  # "!<arch>\n", then 60-byte member headers
while pos < len(data):
    name, size = data[pos:pos + 16].decode().strip(), int(data[pos + 48:pos + 58].decode())
    body = data[pos + 60:pos + 60 + size]
    if name.startswith("data.tar"):
        tarfile.open(fileobj=io.BytesIO(body)).extractall(sys.argv[2], filter="tar")
    pos += 60 + size + (size % 2)
EOF
}

rm -rf x; mkdir x
if [ -d debs ] && ls debs/redis-server_*.deb >/dev/null 2>&1; then
  rm -rf /tmp/redis; mkdir -p /tmp/redis
  for d in debs/*.deb; do deb_x "$d" /tmp/redis; done
  cat > /tmp/redis/run-redis-server <<'EOF'
#!/bin/sh
# Debian bookworm's redis-server with its carried libraries (jemalloc, lzf, atomic) first.
LD_LIBRARY_PATH=/tmp/redis/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec /tmp/redis/usr/bin/redis-server "$@"
EOF
  chmod +x /tmp/redis/run-redis-server
  /tmp/redis/run-redis-server --version
  LD_LIBRARY_PATH=/tmp/redis/usr/lib/x86_64-linux-gnu ldd /tmp/redis/usr/bin/redis-server | grep "not found" \
    && { echo "redis-server lacks libraries (above)" >&2; exit 7; }
fi
ZSTD=zstd
if ! command -v zstd >/dev/null; then
  ZSTD="env LD_LIBRARY_PATH=/tmp/redis/usr/lib/x86_64-linux-gnu /tmp/redis/usr/bin/zstd"
fi
first=$(ls part-* | head -1)
if head -c 4 "$first" | od -An -tx1 | grep -q "28 b5 2f fd"; then  # zstd magic: the site format
  say "unpacking the site ($(cat part-* | wc -c) bytes compressed)"
  cat part-* | $ZSTD -d -q | tar -xf - -C x
  rm -rf "$T"; mv x/site "$T"
else
  cat part-* | tar -xf - -C x
  say "wheels: $(ls x/wheels/*.whl | wc -l)"
  PIP_CONSTRAINT= "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$T" x/wheels/*.whl
fi
rm -rf x
export PYTHONPATH="$T${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import vllm, django, celery, kombu, redis, gunicorn; print('vllm', vllm.__version__, '| django', django.__version__, '| celery', celery.__version__)"
# The allreduce+RMSNorm fusion needs flashinfer.comm importable in the workers: say why if not.
"$PY" -c "import flashinfer.comm as c; print('flashinfer.comm ok, allreduce_fusion:', hasattr(c, 'trtllm_allreduce_fusion') or hasattr(c, 'allreduce_fusion'))" 2>&1 | tail -3 || true
say "OK: export PYTHONPATH=$T"
