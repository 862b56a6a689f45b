#!/bin/sh
# The device run in one call (bench/gpu.py): what the machine has, then every step, under
# 8 minutes. Needs $OUT (the results directory) and bench/results/tmp/gpu-shapes (made here
# by `python -m bench.gpu prepare`, carried to the device). PYTHON: the interpreter to use.
set -u
OUT="${OUT:?set OUT to the results directory}"
PY="${PYTHON:-python}"
mkdir -p "$OUT"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    "$PY" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, \
'cuda', torch.version.cuda, torch.cuda.is_available())"
    "$PY" -c "import transformers, pygls, pytest, pytest_lsp; print('transformers', \
transformers.__version__, 'pygls', pygls.__version__ if hasattr(pygls, '__version__') else '?')"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
exec timeout 500 "$PY" -m bench.gpu run --out "$OUT" "$@"
