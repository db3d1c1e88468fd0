#!/usr/bin/env bash
# Record the hot-spot fixtures on a GPU machine: for the shipped Triton softmax and matmul and the
# CuTeDSL matmul, `ktui profile` (which collects SourceCounters with --import-source yes), the raw
# per-instruction page (`ncu --import R --page source --csv --print-source sass`), the
# `ktui profile --json` line, and the static inputs of the same build (nvdisasm -c -g listing, PTX,
# CUBIN, source.py, hotspots.json).
#
# Run from the repository root with $OUT set (under 3 minutes):
#     OUT=/some/dir bash tests/benchmarks/record_hotspot_fixtures.sh
# It writes $OUT/hotspot_fixtures.tgz (extract at the repository root: it fills
# tests/fixtures/hotspots/h200/) and $OUT/record.log (every command, its exit code and output).
set -u
: "${OUT:?set OUT to the folder that receives the results}"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
WS="$WORK/ws"
FIX="$WORK/tests/fixtures/hotspots/h200"
LOG="$OUT/record.log"
mkdir -p "$OUT" "$FIX" "$WS/kernels" "$WS/references"
: > "$LOG"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

step() {  # step NAME TIMEOUT CMD...: run in the workspace with a time limit, log command, exit code, output
  local name="$1" limit="$2"; shift 2
  echo "### $name: $*" >> "$LOG"
  ( cd "$WS" && timeout --kill-after=10 "$limit" "$@" ) >> "$LOG" 2>&1
  echo "### $name: exit $?" >> "$LOG"
}

{
  echo "date: $(date -u +%FT%TZ)"; echo "repo commit: $(git -C "$REPO" rev-parse HEAD 2>/dev/null)"
  nvidia-smi -L 2>&1
} >> "$LOG"
NCU="$("$PY" -c "from ktui.profiling.profile import find_ncu; print(find_ncu())" 2>>"$LOG")"
ND="$("$PY" -c "from ktui.measure.sass import find_tool; print(find_tool('nvdisasm'))" 2>>"$LOG")"
echo "ncu: ${NCU:-missing}" >> "$LOG"; [ -n "$NCU" ] && "$NCU" --version >> "$LOG" 2>&1

cp "$REPO"/references/*.py "$WS/references/"
KERNELS="softmax_triton gemm_bf16_triton gemm_bf16_cutedsl"
for k in $KERNELS; do cp "$REPO/kernels/$k.py" "$WS/kernels/"; done
step run 150 "$PY" -m ktui run --no-bench --seed 1 $(for k in $KERNELS; do echo "kernels/$k.py"; done)

for k in $KERNELS; do
  ( cd "$WS" && timeout --kill-after=10 90 "$PY" -m ktui profile "kernels/$k.py" --json ) \
    > "$FIX/${k}_profile.jsonl" 2>> "$LOG"
  echo "### profile $k: exit $?" >> "$LOG"
  dir="$WS/.ktui/runs/$k/1"
  [ -f "$dir/profile.ncu-rep" ] && "$NCU" --import "$dir/profile.ncu-rep" --page source --csv --print-source sass \
    > "$FIX/${k}_source.csv" 2>> "$LOG"
  for f in "$dir"/*.cubin; do
    [ -f "$f" ] || continue
    "$ND" -c -g "$f" > "$FIX/${k}.sass" 2>> "$LOG"
    cp "$f" "$FIX/${k}.cubin"; [ -f "${f%.cubin}.ptx" ] && cp "${f%.cubin}.ptx" "$FIX/${k}.ptx"
  done
  for f in source.py hotspots.json hotspots_measured.json ncu.txt; do
    [ -f "$dir/$f" ] && cp "$dir/$f" "$FIX/${k}_$f"
  done
done
cat > "$FIX/README.md" <<EON
Recorded by tests/benchmarks/record_hotspot_fixtures.sh on $(nvidia-smi -L 2>/dev/null | head -1) at $(date -u +%FT%TZ):
\`<k>_source.csv\` is \`ncu --import profile.ncu-rep --page source --csv --print-source sass\` of
\`ktui profile kernels/<k>.py\` (SourceCounters, --import-source yes); \`<k>.sass\` is \`nvdisasm -c -g\` of the same
run's CUBIN (\`<k>.cubin\`, \`<k>.ptx\`, \`<k>_source.py\`); \`<k>_profile.jsonl\` is \`ktui profile --json\`;
\`<k>_hotspots.json\`/\`<k>_hotspots_measured.json\` are what ktui wrote into the run folder.
(The tests keep only gemm_bf16_triton.cubin, and no _ncu.txt or _profile.jsonl: see the committed README.md.)
EON
tar -C "$WORK" -czf "$OUT/hotspot_fixtures.tgz" tests/fixtures/hotspots/h200
ls -la "$FIX" >> "$LOG"
rm -rf "$WORK"
