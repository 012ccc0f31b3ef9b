#!/usr/bin/env bash
# One prepared run on a CUDA machine (made for one H200), from the repo root: the CUDA variants of the model,
# parity and engine tests, then `tinyserve bench` and benchmarks/paged.py (paged against slab decode steps) on the
# GPU. Results go to $OUT (or a fresh /tmp/tinyserve-gpu.* folder).
#
#   bash benchmarks/gpu.sh                        # a few minutes
#   DEVICE=cpu REPEATS=1 bash benchmarks/gpu.sh   # the same steps on a CPU (to check the script itself)
#
# Python: if the machine's python3 (or $PYTHON) already has a CUDA torch, transformers and psutil, it is used
# as is and tinyserve runs from lib/ (no network needed: GPU boxes are often offline). Otherwise a venv
# .venv-gpu gets requirements-test.txt (torch==2.13.0 from PyPI is the CUDA build on Linux x86-64).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d /tmp/tinyserve-gpu.XXXXXX)}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/lib${PYTHONPATH:+:$PYTHONPATH}"

has_stack() { "$1" -c "import torch, transformers, psutil, safetensors, tqdm, pytest, hypothesis
assert '$DEVICE' != 'cuda' or torch.cuda.is_available()" 2>/dev/null; }
if ! has_stack "$PY"; then
  echo "== $PY lacks torch ($DEVICE)/transformers/psutil/pytest: installing requirements-test.txt into .venv-gpu"
  [ -x .venv-gpu/bin/python ] || "$PY" -m venv .venv-gpu || exit 1
  PY=.venv-gpu/bin/python
  "$PY" -m pip install -q -r requirements-test.txt || exit 1
  has_stack "$PY" || { echo "gpu.sh: torch sees no $DEVICE device" >&2; exit 1; }
fi

"$PY" - <<'EOF' 2>&1 | tee "$OUT/env.txt"
import platform, torch, transformers
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
print("python", platform.python_version(), "| torch", torch.__version__, "| cuda", torch.version.cuda,
      "| transformers", transformers.__version__, "|", gpu)
if transformers.__version__ != "5.24.0":
    print("NOTE: the project pins transformers==5.24.0; continuous-batching APIs move between versions")
EOF
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>/dev/null | tee -a "$OUT/env.txt"

TESTS="tests/model/test_model.py tests/model/test_paged_reads.py tests/tools/test_hf.py tests/core/test_engine.py"
echo "== CUDA tests ($TESTS)"
timeout 300 "$PY" -m pytest -q -p no:cacheprovider $TESTS 2>&1 \
  | tee "$OUT/pytest.log" | tail -n 25
tests_rc=${PIPESTATUS[0]}

echo "== tinyserve bench --device $DEVICE"
timeout 420 "$PY" -m tinyserve bench --json --device "$DEVICE" --repeats "${REPEATS:-3}" >"$OUT/bench-$DEVICE.json" \
  2>"$OUT/bench-$DEVICE.log"
bench_rc=$?
tail -n 20 "$OUT/bench-$DEVICE.log"
if [ $bench_rc -eq 0 ]; then
  "$PY" -c 'import json, sys; from tinyserve.tools.bench import format_table
print(format_table(json.load(open(sys.argv[1]))))' "$OUT/bench-$DEVICE.json" | tee "$OUT/bench-$DEVICE.txt"
fi
echo "== benchmarks/paged.py --device $DEVICE (paged against slab decode steps, issue 51)"
timeout 300 "$PY" benchmarks/paged.py --device "$DEVICE" --rounds "${REPEATS:-3}" --json "$OUT/paged-$DEVICE.json" \
  2>"$OUT/paged-$DEVICE.log" | tee "$OUT/paged-$DEVICE.txt"
paged_rc=${PIPESTATUS[0]}
echo "== tests rc=$tests_rc, bench rc=$bench_rc, paged rc=$paged_rc; results in $OUT"
exit $(( tests_rc != 0 || bench_rc != 0 || paged_rc != 0 ))
