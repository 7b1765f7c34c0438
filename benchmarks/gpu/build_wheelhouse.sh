#!/usr/bin/env bash
# Build the carry for the service on a GPU host without internet. Runs HERE
# (PyPI and Debian's apt reachable), never on the GPU host. It collects:
#   - vllm==0.24.0 and what the GPU host lacks for it (Python 3.12, manylinux x86_64), resolved
#     by `uv pip compile` with the host's own packages overridden away;
#   - the service's web/worker dependencies the host lacks (Django, Celery, kombu, redis, ...);
#   - Debian's redis-server .deb and its non-base libraries (unpacked there with dpkg -x);
# then installs the wheels HERE into one site folder for the host's Python 3.12 (so the host
# only unpacks: no pip run there), compresses it (tar | zstd -12: 297 MiB against 381 MB of
# wheels) and splits it into .gpu-carry/pN/part-NN (one carry path per device call, each at
# most PART_MB MiB), with SHA256SUMS and WHEELS.txt in the last part; the .debs (redis, and
# zstd to unpack with) go in p1/debs; the tiny model's tokenizer in .gpu-carry/tokenizer
# (run_ladder.sh and service_on_gpu.sh generate the random-weight model from it); the wheels a
# benchmark's `packages` name (GGUF_WHEELS: vllm-gguf-plugin and gguf) in .gpu-carry/wheels, the
# GPU worker's wheelhouse (service_on_gpu.sh SVC_WHEELHOUSE).
#   bash benchmarks/gpu/build_wheelhouse.sh         # then see the part sizes it prints
#   FIRST_MB=40 bash benchmarks/gpu/build_wheelhouse.sh  # p1 smaller: room in the first call for
#                                                   # the tokenizer, the wheels and an app snapshot
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=$ROOT/.gpu-carry
WORK=${WORK:-/tmp/gpu-wheelhouse}
PART_MB=${PART_MB:-58}
FIRST_MB=${FIRST_MB:-}                   # the first part's size (the rest split evenly); default even
GGUF_WHEELS=${GGUF_WHEELS-vllm-gguf-plugin==0.0.5 gguf==0.19.0}
UV=${UV:-$ROOT/.venv/bin/uv}
PY=${PY:-$ROOT/.venv/bin/python}
mkdir -p "$WORK/wheels" "$WORK/debs"
cd "$WORK"
say() { echo "[$(date +%H:%M:%S)] $*"; }

# The GPU host's packages (KINDS.md "Python packages already there", 2026-11-17): never carried.
HOST="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas
nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile
nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax
opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy
portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core
scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson
six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision
tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug
wheel wrapt xarray xxhash yarl zipp"
# Not needed for a Llama decode on H200 (docs/engine-notes.md), or a CUDA toolchain the host has (nvcc).
# cuda-tile (427 KB) stays: flashinfer.comm imports cuda.tile, and without flashinfer.comm vLLM
# skips the allreduce + RMSNorm fusion ("Flashinfer is not installed or comm module not found").
SKIP="nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-tileiras nvidia-cuda-crt flashinfer-cubin tilelang
nvidia-cutlass-dsl nvidia-cutlass-dsl-libs-base quack-kernels humming-kernels tokenspeed-mla fastsafetensors
nvidia-cudnn-frontend psycopg psycopg-binary"
for p in $HOST $SKIP; do echo "$p ; sys_platform == 'never'"; done > overrides.txt
cat > constraints.txt <<'EOF'
xgrammar==0.2.3
flashinfer-python==0.6.12
apache-tvm-ffi==0.1.9
EOF
# vLLM, plus the service's base and web/worker extras as pyproject.toml states them (psycopg is
# not needed: the GPU run uses SQLite).
cat > requirements.in <<'EOF'
vllm==0.24.0
httpx>=0.27,<1
prometheus_client>=0.20,<1
Django>=5.1,<5.3
celery[redis]>=5.4,<5.6
dj-database-url>=2.2,<4
PyYAML>=6,<7
gunicorn>=23,<24
whitenoise>=6.7,<7
EOF
say "resolving (uv pip compile, Python 3.12, x86_64-manylinux_2_28)"
"$UV" pip compile requirements.in --python-version 3.12 --python-platform x86_64-manylinux_2_28 \
  --index-url https://pypi.org/simple --no-header --no-annotate --override overrides.txt \
  --constraint constraints.txt -o requirements.txt -q
grep -v '^\s*#' requirements.txt | sed '/^\s*$/d' > pins.txt
say "$(wc -l < pins.txt) wheels to fetch"
# pip matches each manylinux tag exactly: list the ones the wheels use.
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64
      --platform manylinux_2_5_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64
      --platform manylinux_2_35_x86_64 --platform linux_x86_64 --platform any)
PIP_CONFIG_FILE=/dev/null PIP_CONSTRAINT= PIP_FIND_LINKS= "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --abi cp312 --abi abi3 --abi none "${PLAT[@]}" --index-url https://pypi.org/simple \
  -d wheels -r pins.txt
# Only the wheels of this resolution (a reused WORK may hold older ones).
"$PY" - <<'EOF'
import pathlib, re
pins = {re.sub(r"[-_.]+", "-", l.split("==")[0]).lower(): l.split("==")[1].split(";")[0].strip()
        for l in open("pins.txt") if "==" in l}
for w in pathlib.Path("wheels").glob("*.whl"):
    name, version = w.name.split("-")[:2]
    if pins.get(re.sub(r"[-_.]+", "-", name).lower()) != version:
        print("dropping stale", w.name); w.unlink()
got = {re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() for w in pathlib.Path("wheels").glob("*.whl")}
missing = sorted(set(pins) - got)
assert not missing, f"no wheel for {missing}"
EOF
ls wheels > WHEELS.txt
say "wheels: $(wc -l < WHEELS.txt), $(du -sm wheels | cut -f1) MB"

say "Debian packages: redis-server and its non-base libraries; zstd to unpack the carry"
rm -f debs/*.deb
(cd debs && apt-get download redis-server redis-tools liblzf1 libjemalloc2 libatomic1 zstd liblz4-1 2>&1 | grep -v unsandboxed || true)
ls debs

say "installing into one site folder for Python 3.12 (the host only unpacks it: no pip there)"
rm -rf stage; mkdir -p stage
"$UV" pip install -q --target stage/site --python-version 3.12 --python-platform x86_64-manylinux_2_35 \
  --no-deps --no-index --no-compile wheels/*.whl
# Never loaded by a Llama decode: a static library for C++ builds (65 MB), Mistral's tokenizer data
# (34 MB), deep_gemm's extensions for other Pythons, console scripts with this machine's shebang.
rm -rf stage/site/bin stage/site/xgrammar/lib/*.a stage/site/mistral_common/data/tekken_*.json
find stage/site -name '*.cpython-31[0134]-x86_64-linux-gnu.so' -delete
say "site: $(du -sm stage/site | cut -f1) MB"

say "packing: tar | zstd -12, split into parts of at most ${PART_MB} MiB${FIRST_MB:+ (the first $FIRST_MB MiB)}"
tar -cf - -C stage site | zstd -q -T2 -12 -f -o carry.tar.zst
total=$(stat -c %s carry.tar.zst)
limit=$((PART_MB * 1024 * 1024))
rm -rf "$CARRY" parts; mkdir -p "$CARRY" parts
if [ -n "$FIRST_MB" ]; then  # part-00 of FIRST_MB MiB, the rest in even parts of at most PART_MB
  first=$((FIRST_MB * 1024 * 1024)); rest=$((total - first))
  m=$(( (rest + limit - 1) / limit )); chunk=$(( (rest + m - 1) / m )); n=$((m + 1))
  head -c "$first" carry.tar.zst >parts/part-00
  tail -c +"$((first + 1))" carry.tar.zst | split -b "$chunk" -d -a 2 --numeric-suffixes=1 - parts/part-
else
  n=$(( (total + limit - 1) / limit ))
  chunk=$(( (total + n - 1) / n ))
  split -b "$chunk" -d -a 2 carry.tar.zst parts/part-
fi
cat parts/part-* | cmp -s - carry.tar.zst || { echo "the parts do not add up to carry.tar.zst" >&2; exit 5; }
i=0
for p in parts/part-*; do
  i=$((i + 1)); mkdir -p "$CARRY/p$i"; mv "$p" "$CARRY/p$i/"
done
(cd "$CARRY" && sha256sum p*/part-* | sed 's# p[0-9]*/# #' > "p$n/SHA256SUMS")
cp WHEELS.txt "$CARRY/p$n/"
# Redis and zstd travel unpacked-ready in the first part (a few MB): the host needs them before the rest.
mkdir -p "$CARRY/p1/debs"; cp debs/*.deb "$CARRY/p1/debs/"
(cd "$CARRY/p1/debs" && sha256sum *.deb > ../DEBS.sha256)
# The tiny model's tokenizer (about 1 MB): the random-weight model takes it.
TINY=${BENCH_TINY_MODEL_DIR:-$ROOT/var/tiny-model}
[ -f "$TINY/config.json" ] || "$PY" -m runners tiny-model "$TINY"
mkdir -p "$CARRY/tokenizer"
for f in tokenizer.json tokenizer_config.json special_tokens_map.json generation_config.json; do
  [ -f "$TINY/$f" ] && cp "$TINY/$f" "$CARRY/tokenizer/"
done
if [ -n "$GGUF_WHEELS" ]; then  # no dependencies: the worker installs them with --no-deps
  mkdir -p "$CARRY/wheels"
  PIP_CONFIG_FILE=/dev/null PIP_CONSTRAINT= PIP_FIND_LINKS= "$PY" -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp "${PLAT[@]}" --index-url https://pypi.org/simple \
    -d "$CARRY/wheels" $GGUF_WHEELS
fi
say "zstd carry: $((total / 1048576)) MiB in $n parts (the wheels were $(du -sm wheels | cut -f1) MB)"
du -sm "$CARRY"/* | sed 's#'"$ROOT"/'##'
