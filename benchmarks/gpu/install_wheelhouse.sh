#!/usr/bin/env bash
# Offline install of vllm==0.24.0 (plus the deps the GPU host lacks) from wheelhouse
# parts collected under one directory (default /tmp/wh/part-NN, optional SHA256SUMS and
# WHEELS.txt beside them). No network. Usage:
#   bash benchmarks/gpu/install_wheelhouse.sh [PARTS_DIR] [TARGET]
# then: export PYTHONPATH=TARGET  (default /tmp/vllm-site)
set -euo pipefail
D=${1:-/tmp/wh}
T=${2:-/tmp/vllm-site}
PY=${PYTHON:-python3}
cd "$D"
ls part-* >/dev/null 2>&1 || { echo "no parts under $D" >&2; exit 2; }
if [ -f SHA256SUMS ]; then
  missing=$(awk '{print $2}' SHA256SUMS | while read -r p; do [ -f "$p" ] || echo "$p"; done)
  [ -z "$missing" ] || { echo "missing parts: $missing" >&2; exit 3; }
  sha256sum -c --quiet SHA256SUMS || { echo "checksum mismatch" >&2; exit 4; }
fi
rm -rf wheels
cat part-* | tar -xf -
n=$(ls wheels/*.whl | wc -l)
if [ -f WHEELS.txt ]; then
  want=$(wc -l < WHEELS.txt)
  [ "$n" -eq "$want" ] || { echo "got $n wheels, want $want" >&2; exit 5; }
fi
echo "wheels: $n"
PIP_CONSTRAINT= "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade \
  --target "$T" "$D"/wheels/*.whl
export PYTHONPATH="$T${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import vllm; print('vllm', vllm.__version__)"
"$PY" -m vllm.entrypoints.cli.main serve --help >/tmp/vllm-serve-help.txt 2>&1 \
  || { tail -40 /tmp/vllm-serve-help.txt >&2; exit 6; }
head -3 /tmp/vllm-serve-help.txt
echo "OK: export PYTHONPATH=$T"
