#!/bin/sh
# The device run in one call (bench/gpu.py): what the machine has, then every step, under
# 8 minutes. Needs $OUT (the results directory) and bench/results/tmp/gpu-carry (made here
# by `python -m bench.gpu prepare`, carried to the device): its wheels are installed beside
# the image's packages and its shapes unpacked. PYTHON: the interpreter to use.
set -u
OUT="${OUT:?set OUT to the results directory}"
PY="${PYTHON:-python3}"
CARRY="${CARRY:-bench/results/tmp/gpu-carry}"
mkdir -p "$OUT"
# the tree's packages (not installed there), then the carried wheels, then the image's own
IMAGE_PATH="${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH="$PWD$IMAGE_PATH"
if [ -d "$CARRY/wheels" ]; then
    SITE="${SITE:-/tmp/gpu-site}"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$CARRY"/wheels/*.whl || exit 1
    export PYTHONPATH="$PWD:$SITE$IMAGE_PATH"
fi
if [ -f "$CARRY/shapes.tar.xz" ]; then
    tar -xJf "$CARRY/shapes.tar.xz" -C bench/results/tmp || exit 1
fi
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    "$PY" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, \
'cuda', torch.version.cuda, torch.cuda.is_available())"
    "$PY" -c "import transformers, pygls, pytest, pytest_lsp, sqlite_utils, tree_sitter_language_pack; \
print('transformers', transformers.__version__, 'pytest', pytest.__version__)"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
exec timeout 500 "$PY" -m bench.gpu run --out "$OUT" "$@"
