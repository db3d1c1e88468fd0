#!/usr/bin/env bash
# Record the GPU fixtures the CPU tests parse: real ncu CSV exports, `ktui profile --json` output,
# SASS of two versions, a Proton sections tree and a compute-sanitizer report.
#
# Run on the GPU machine from the repository root with $OUT set (about 3 minutes):
#     OUT=/some/dir bash tests/benchmarks/record_gpu_fixtures.sh
# It writes two files: $OUT/gpu_fixtures.tgz (extract at the repository root: it fills
# tests/fixtures/gpu/) and $OUT/record.log (every command, its exit code and output). A step that
# fails is logged and the others still run. RUN_GPU_TESTS=1 also runs `pytest -m gpu` on the new
# engines at the end (about 3 more minutes).
set -u
: "${OUT:?set OUT to the folder that receives the results}"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
WS="$WORK/ws"
FIX="$WORK/tests/fixtures/gpu"
LOG="$OUT/record.log"
mkdir -p "$OUT" "$FIX/sass" "$WS/kernels" "$WS/references"
: > "$LOG"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

step() {  # step NAME TIMEOUT CMD...: run with a time limit, log command, exit code and output
  local name="$1" limit="$2"; shift 2
  echo "### $name: $*" >> "$LOG"
  local started=$SECONDS
  ( cd "$WS" && timeout --kill-after=10 "$limit" "$@" ) >> "$LOG" 2>&1
  local rc=$?
  echo "### $name: exit $rc after $((SECONDS - started)) s" >> "$LOG"
  return $rc
}

ktui() { "$PY" -m ktui "$@"; }

# -- the machine ----------------------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"; echo "repo commit: $(git -C "$REPO" rev-parse HEAD 2>/dev/null)"
  nvidia-smi -L 2>&1; nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1
  "$PY" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)" 2>&1
} >> "$LOG"
NCU="$("$PY" -c "from ktui.profiling.profile import find_ncu; print(find_ncu())" 2>>"$LOG")"
SAN="$("$PY" -c "from ktui.profiling.sanitize import find_sanitizer; print(find_sanitizer())" 2>>"$LOG")"
echo "ncu: ${NCU:-missing}; compute-sanitizer: ${SAN:-missing}" >> "$LOG"
[ -n "$NCU" ] && "$NCU" --version >> "$LOG" 2>&1
[ -n "$SAN" ] && "$SAN" --version >> "$LOG" 2>&1
"$PY" -c "from ktui.profiling.profile import ncu_report_module; print('ncu_report module:', ncu_report_module('$NCU'))" >> "$LOG" 2>&1

# -- a workspace with the shipped softmax and the fixtures ----------------------------------------
cp "$REPO"/references/*.py "$WS/references/"
cp "$REPO/kernels/softmax_triton.py" "$REPO/kernels/add_triton.py" "$WS/kernels/"
for f in softmax_twopass softmax_sections oob_read; do cp "$REPO/tests/fixtures/kernels/$f.py" "$WS/kernels/"; done
step run-all 300 "$PY" -m ktui run --no-bench --seed 1 kernels/

run_dir() { echo "$WS/.ktui/runs/$1/$2"; }

# -- ncu: the shipped softmax and the two-kernel softmax ------------------------------------------
for k in softmax_triton:softmax softmax_twopass:twopass; do
  kernel="${k%%:*}"; short="${k##*:}"
  echo "### profile-$short" >> "$LOG"
  ( cd "$WS" && timeout --kill-after=10 240 "$PY" -m ktui profile "kernels/$kernel.py" --json ) \
    > "$FIX/profile_$short.jsonl" 2>> "$LOG"
  echo "### profile-$short: exit $?" >> "$LOG"
  cat "$FIX/profile_$short.jsonl" >> "$LOG"
  rep="$(run_dir "$kernel" 1)/profile.ncu-rep"
  if [ -f "$rep" ] && [ -n "$NCU" ]; then
    "$NCU" --import "$rep" --csv --page raw --print-units base > "$FIX/ncu_${short}_raw.csv" 2>> "$LOG"
    "$NCU" --import "$rep" --csv --page details --print-units base > "$FIX/ncu_${short}_details.csv" 2>> "$LOG"
    cp "$(run_dir "$kernel" 1)/ncu.txt" "$FIX/ncu_$short.txt"
  fi
  cat "$(run_dir "$kernel" 1)/ncu.txt" >> "$LOG" 2>&1
done

# -- SASS of two versions (BLOCK 1024 → 512), compiled on the GPU ---------------------------------
sed -i 's/block = 1024/block = 512/' "$WS/kernels/add_triton.py"
step run-add-v2 120 "$PY" -m ktui run --no-bench --seed 1 kernels/add_triton.py
for v in 1 2; do
  cp "$(run_dir add_triton $v)/add_kernel.sass" "$FIX/sass/add_triton_v$v.sass"
  cp "$(run_dir add_triton $v)/resources.json" "$FIX/sass/add_triton_v$v.resources.json"
done
step diff-add 60 "$PY" -m ktui diff kernels/add_triton.py --no-unified

# -- Proton sections and compute-sanitizer --------------------------------------------------------
( cd "$WS" && timeout 240 "$PY" -m ktui profile kernels/softmax_sections.py --sections --json ) \
  > "$FIX/sections_softmax.jsonl" 2>> "$LOG"
cat "$FIX/sections_softmax.jsonl" >> "$LOG"
cp "$(run_dir softmax_sections 1)/sections.hatchet" "$FIX/sections_softmax.hatchet" 2>> "$LOG"
( cd "$WS" && timeout 300 "$PY" -m ktui sanitize kernels/oob_read.py --json ) > "$FIX/sanitize_oob.json" 2>> "$LOG"
cat "$FIX/sanitize_oob.json" >> "$LOG"
cp "$(run_dir oob_read 1)/sanitize.log" "$FIX/sanitize_oob.log" 2>> "$LOG"
step sanitize-clean 300 "$PY" -m ktui sanitize kernels/softmax_triton.py

# -- what was recorded, and how -------------------------------------------------------------------
{
  echo "# GPU fixtures"
  echo
  echo "Recorded by \`tests/benchmarks/record_gpu_fixtures.sh\` on $(nvidia-smi -L 2>/dev/null | head -1)"
  echo "on $(date -u +%F) ($("$NCU" --version 2>/dev/null | tail -1); $("$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>/dev/null))."
  echo
  echo "- \`ncu_<k>_raw.csv\`, \`ncu_<k>_details.csv\`: \`ncu --import profile.ncu-rep --csv --page raw|details --print-units base\`"
  echo "  of the report \`ktui profile kernels/<kernel>.py\` wrote (softmax: kernels/softmax_triton.py;"
  echo "  twopass: tests/fixtures/kernels/softmax_twopass.py), benchmark shape 0, ktui's basic set."
  echo "- \`profile_<k>.jsonl\`: the \`ktui profile --json\` output of the same command."
  echo "- \`sass/add_triton_v1|v2.*\`: kernels/add_triton.py with BLOCK 1024 (v1) and 512 (v2), \`ktui run\` on the GPU."
  echo "- \`sections_softmax.*\`: \`ktui profile --sections\` of tests/fixtures/kernels/softmax_sections.py."
  echo "- \`sanitize_oob.*\`: \`ktui sanitize\` (memcheck) of tests/fixtures/kernels/oob_read.py."
} > "$FIX/README.md"

if [ "${RUN_GPU_TESTS:-0}" = 1 ]; then
  echo "### pytest -m gpu" >> "$LOG"
  ( cd "$REPO" && timeout 600 "$PY" -m pytest -m gpu -q -p no:cacheprovider tests/profiling/test_profile_gpu.py ) >> "$LOG" 2>&1
  echo "### pytest -m gpu: exit $?" >> "$LOG"
fi

tar -czf "$OUT/gpu_fixtures.tgz" -C "$WORK" tests/fixtures/gpu
echo "### recorded: $(cd "$WORK" && find tests/fixtures/gpu -type f | sort | tr '\n' ' ')" >> "$LOG"
du -sh "$OUT"/gpu_fixtures.tgz >> "$LOG"
rm -rf "$WORK"
