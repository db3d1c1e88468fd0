#!/usr/bin/env bash
# One sitting on a GPU machine: every GPU test and every figure the README quotes, in parts
# that each fit one 10-minute call. Run from the repository root with $OUT set:
#
#     bash tests/benchmarks/gpu_session.sh part1   # pytest -m gpu, then the recorded fixtures
#     bash tests/benchmarks/gpu_session.sh part2   # timer fidelity, calibrate, screenshots
#     bash tests/benchmarks/gpu_session.sh part3   # loop latency, one plain run
#     bash tests/benchmarks/gpu_session.sh verify  # the GPU suite
#     bash tests/benchmarks/gpu_session.sh commands  # every command on every format, calibrate (MEMORY=1: memory)
#     bash tests/benchmarks/gpu_session.sh suite   # the roofline kernel suite, watch latency by stage
#     bash tests/benchmarks/gpu_session.sh stories # each kernel's path, version by version
#     bash tests/benchmarks/gpu_session.sh cute    # the CuTeDSL kernels alone, verbose
#     CORPORA=.corpora bash tests/benchmarks/gpu_session.sh audit   # ktui audit of both public corpora
#     bash tests/benchmarks/gpu_session.sh memory                   # peak memory at KernelBench sizes, benchmark on and off
#     CORPORA=.corpora bash tests/benchmarks/gpu_session.sh trust   # ktui's column of the corpus table, benchmark on
#     DEADLINE=540 bash tests/benchmarks/gpu_session.sh queue STEP...  # the steps below, in order, while they fit
#
# queue's steps (each with its limit): gpu (the GPU suite: tests that time alone, the rest in four
# processes), hotspots (the hot-spot fixtures), roofline (calibrate, every shipped kernel of the
# three DSLs at its benchmark shapes), latency (the owner and MCP latencies), mcp (an agent-style
# MCP session), memory (KernelBench sizes, benchmark on), trust (ktui's corpus column), watch (save →
# verdict through the watcher, with compile-ahead and without), watch-dsls (one compile of one
# specialisation per DSL, then save → verdict for the CuTeDSL softmax and the TileLang softmax,
# RMSNorm and GEMM, saves a second apart), contention (nvdisasm and a compile beside
# busy processes), first (a new user's first calls: tests/benchmarks/first_contact.py), confine (CUDA and nvcc
# under the worker's confinement: tests/benchmarks/confine_probe.py), watch-tl (watch-dsls' TileLang kernels alone), shots (the H200
# screenshots, calibrated, with an ncu profile), start (a worker's start by phase), tests (the
# GPU tests named in TESTS, alone; TESTS_LIMIT seconds, default 200). A step that
# would end past DEADLINE seconds is not started; queue.log names what ran and what is left.
#
# Each step has its own time limit and its own log under $OUT; a failing step never stops the
# next one. Nothing here changes the GPU's settings.
set -u
: "${OUT:?set OUT to the folder that receives the results}"
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the commands run from scratch folders outside the checkout
PY="${PYTHON:-python3}"
# test_mcp.py holds no GPU test; the modules that do import the MCP SDK need it staged (gpu_stage.sh)
GPU_TESTS=(-m gpu -q -p no:cacheprovider -rA --timeout 300 --ignore=tests/agents/test_mcp.py)

step() {  # step LOG LIMIT CMD...
  local log="$OUT/$1" limit="$2"; shift 2
  echo "### $* (limit ${limit} s)" >> "$log"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
  echo "### exit $? after $((SECONDS - t0)) s" >> "$log"
}

machine() {
  { date -u +%FT%TZ; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem --format=csv
    "$PY" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  } >> "$OUT/$1" 2>&1
}

case "${1:-}" in
  part1)  # about 9 minutes
    machine pytest_gpu.log
    step pytest_gpu.log 320 "$PY" -m pytest "${GPU_TESTS[@]}"
    step record.log 230 bash tests/benchmarks/record_gpu_fixtures.sh
    ;;
  part2)  # about 9 minutes
    machine figures.log
    step figures.log 230 "$PY" tests/benchmarks/timer_fidelity.py --budget 200 --json "$OUT/timer_fidelity.json"
    step figures.log 60 "$PY" -m ktui calibrate
    step shots.log 270 "$PY" screenshots/make_screenshots.py --name h200 --profile --panes 3,5 \
      --kernels softmax_triton,add_triton --out "$OUT/shots"
    tar -czf "$OUT/screenshots.tgz" -C "$OUT" shots 2>> "$OUT/shots.log" && rm -rf "$OUT/shots"
    ;;
  part3)  # about 2 minutes
    machine figures.log
    step figures.log 100 "$PY" tests/benchmarks/loop_latency.py --reps 3 --json "$OUT/loop_latency.json"
    step run.log 60 "$PY" -m ktui run kernels/ --seed 1 --bench-time 1
    ;;
  verify)  # about 9 minutes: the GPU suite alone (it outgrew a shared 10-minute call)
    machine verify.log
    step verify.log 540 "$PY" -m pytest "${GPU_TESTS[@]}"
    ;;
  commands)  # about 3 minutes: every command on every format, the calibration, memory at real sizes
    machine commands.log
    work=$(mktemp -d)
    cp -r tests/fixtures/gpumode "$work/gm" && mkdir "$work/pair"
    cp tests/fixtures/kernelbench/scale_shift_relu.py "$work/pair/problem.py"
    cp tests/fixtures/kernelbench/scale_shift_relu_triton.py "$work/pair/candidate.py"
    (cd "$work/gm/scaleadd" && step commands.log 60 "$PY" -m ktui run submission.py --bench-time 1 \
      && step commands.log 60 "$PY" -m ktui profile submission.py \
      && step commands.log 60 "$PY" -m ktui sanitize submission.py)
    (cd "$work/pair" && step commands.log 60 "$PY" -m ktui run candidate.py --reference problem.py --bench-time 1 \
      && step commands.log 60 "$PY" -m ktui profile candidate.py --reference problem.py \
      && step commands.log 60 "$PY" -m ktui sanitize candidate.py --reference problem.py)
    step commands.log 90 "$PY" -m ktui calibrate --json
    [ -n "${MEMORY:-}" ] && step memory.log 200 "$PY" tests/benchmarks/memory_footprint.py --json "$OUT/memory_footprint.json"
    ;;
  suite)  # about 7 minutes: the roofline kernel suite, then save → verdict through the watcher
    machine suite.log
    step suite.log 360 "$PY" tests/benchmarks/roofline_suite.py kernels
    step suite.log 120 "$PY" tests/benchmarks/watch_latency.py --reps 6 --json "$OUT/watch_latency.json"
    ;;
  stories)  # about 5 minutes: each kernel's path, version by version, replayed through ktui run
    machine stories.log
    for name in rmsnorm_triton gemm_bf16_triton; do
      step stories.log 200 "$PY" tests/benchmarks/version_story.py . "$name" tests/benchmarks/stories/"$name"/*.py \
        kernels/"$name".py \
        --json "$OUT/story_$name.json"
    done
    ;;
  cute)  # about 2 minutes: the CuTeDSL kernels alone, verbose
    machine cute.log
    step cute.log 240 "$PY" -m ktui run kernels/softmax_cutedsl.py kernels/rmsnorm_cutedsl.py kernels/gemm_bf16_cutedsl.py \
      --bench-time 1 -v
    ;;
  audit)  # about 9 minutes; CORPORA names the folder holding gpumode/ and kernelbench/
    machine audit.log
    step audit.log 540 "$PY" tests/benchmarks/audit_corpus.py --kernelbench "${CORPORA:?}/kernelbench/KernelBench/level1" \
      --gpumode "$CORPORA/gpumode/problems/pmpp_v2" --out "$OUT/audit_rows.json"
    ;;
  corpus)  # about 9 minutes; CORPORA names the folder holding gpumode/ and kernelbench/
    machine corpus.log
    step corpus.log 560 "$PY" tests/benchmarks/corpus_table.py --gpumode "${CORPORA:?}/gpumode/problems/pmpp_v2" \
      --kernelbench "$CORPORA/kernelbench" --out /tmp/corpus --timeout 150 --trials 5 --ktui-arg=--bench-time \
      --ktui-arg=1 ${ONLY:-}
    tar -czf "$OUT/corpus.tgz" -C /tmp corpus 2>> "$OUT/corpus.log"
    ;;
  memory)  # about 3 minutes: peak memory at KernelBench sizes with the benchmark on, then off
    machine memory.log
    step memory.log 150 "$PY" tests/benchmarks/memory_footprint.py --bench --json "$OUT/memory_bench.json"
    step memory.log 100 "$PY" tests/benchmarks/memory_footprint.py --json "$OUT/memory_nobench.json"
    ;;
  trust)  # about 8 minutes: ktui's column of the corpus table (every solution, honest and wrong; the
    # evaluators' own columns are not re-run), with the benchmark on and ktui's peak memory per row
    machine corpus.log
    step corpus.log 560 "$PY" tests/benchmarks/corpus_table.py --gpumode "${CORPORA:?}/gpumode/problems/pmpp_v2" \
      --kernelbench "$CORPORA/kernelbench" --out /tmp/corpus --timeout 120 --ktui-only --ktui-arg=--bench-time \
      --ktui-arg=1 ${ONLY:-}
    cp /tmp/corpus/table.md "$OUT/corpus_table.md" 2>> "$OUT/corpus.log"
    ;;
  queue)
    shift
    deadline="${DEADLINE:-540}"
    declare -A LIMIT=([gpu]=450 [gpu-timing]=330 [hotspots]=200 [roofline]=420 [latency]=150 [mcp]=150
                      [memory]=170 [trust]=500 [watch]=220 [watch-dsls]=540 [first]=300 [confine]=200 [watch-tl]=300 [shots]=280 [start]=60 [contention]=120 [tests]=${TESTS_LIMIT:-200})
    for name in "$@"; do
      limit="${LIMIT[$name]:?unknown step $name}"
      if (( SECONDS + limit > deadline )); then echo "left: $name (needs ${limit} s, $((deadline - SECONDS)) s left)" >> "$OUT/queue.log"; continue; fi
      echo "start: $name at ${SECONDS} s" >> "$OUT/queue.log"
      case "$name" in
        gpu) machine gpu.log
             step gpu.log "$limit" "$PY" -m pytest "${GPU_TESTS[@]}" -m "gpu and not timing" -n 4 --dist loadfile ;;
        gpu-timing) machine gpu.log
             step gpu.log "$limit" "$PY" -m pytest "${GPU_TESTS[@]}" -m "gpu and timing" -n 0 ;;
        tests) machine gpu.log  # TESTS names test files or ids, run alone on the GPU
             step gpu.log "$limit" "$PY" -m pytest "${GPU_TESTS[@]}" -n 0 ${TESTS:?} ;;
        hotspots) step hotspots.log "$limit" bash tests/benchmarks/record_hotspot_fixtures.sh ;;
        roofline) machine roofline.log
             step roofline.log "$limit" "$PY" tests/benchmarks/roofline_suite.py kernels --bench-time 1 ;;
        watch) machine watch.log  # save → verdict with the session's defaults: each save at once, then 1 s after the verdict
             step watch.log 130 "$PY" tests/benchmarks/watch_latency.py --reps 6 --settle 15 --json "$OUT/watch_latency.json"
             step watch.log 130 "$PY" tests/benchmarks/watch_latency.py --reps 6 --settle 15 --gap 1 \
               --json "$OUT/watch_latency_gap.json" ;;
        watch-dsls) machine watch.log  # the CuTeDSL and TileLang kernels that have a save → verdict target, saves a second apart
             # first the floor: one compile of one specialisation (a target is that + 0.5 s where it passes 1.5 s)
             step watch.log 60 "$PY" tests/benchmarks/compile_one.py --reps 5 --json "$OUT/compile_one.json"
             for kernel in softmax_cutedsl softmax_tilelang rmsnorm_tilelang gemm_bf16_tilelang; do
               step watch.log 130 "$PY" tests/benchmarks/watch_latency.py --kernel "$kernel" --reps 5 --settle 20 --gap 1 \
                 --json "$OUT/watch_latency_$kernel.json"
             done ;;
        contention) machine contention.log  # nvdisasm and a Triton compile alone, and beside busy processes
             step contention.log "$limit" "$PY" tests/benchmarks/tool_contention.py \
               --busy spin:0,spin:4,spin:12,compile:4,compile:8 --json "$OUT/tool_contention.json" ;;
        confine) machine confine.log  # CUDA and nvcc under the worker's confinement, then one plain run; where
             # confined CUDA does not start, the steps after run unconfined and queue.log says so
             step confine.log 150 "$PY" tests/benchmarks/confine_probe.py
             step confine.log 60 "$PY" -m ktui run kernels/add_triton.py --no-bench --no-daemon --no-audit
             if ! grep -Eq '^on +\+- +cuda: 1 ' "$OUT/confine.log"; then
               export KTUI_NO_CONFINE=1; echo "confined CUDA failed: the steps after run with KTUI_NO_CONFINE=1" >> "$OUT/queue.log"
             fi ;;
        watch-tl) machine watch.log  # the TileLang kernels alone, saves a second apart
             for kernel in softmax_tilelang rmsnorm_tilelang gemm_bf16_tilelang; do
               step watch.log 100 "$PY" tests/benchmarks/watch_latency.py --kernel "$kernel" --reps 5 --settle 20 --gap 1 \
                 --json "$OUT/watch_latency_$kernel.json"
             done ;;
        first) machine first.log  # a fresh user cache and workspace: the first benchmark calibrates; a new reference's audit
             step first.log "$limit" "$PY" tests/benchmarks/first_contact.py --gpumode "${CORPORA:?}/gpumode/problems" \
               --json "$OUT/first_contact.json" ;;
        shots) machine shots.log  # the H200 screenshots: the shipped softmax and add, calibrated, with an ncu profile
             step shots.log "$limit" "$PY" screenshots/make_screenshots.py --name h200 --profile --panes 3,5 \
               --kernels softmax_triton,add_triton --out "$OUT/shots"
             tar -czf "$OUT/screenshots.tgz" -C "$OUT" shots 2>> "$OUT/shots.log" && rm -rf "$OUT/shots" ;;
        start) machine latency.log  # where a cold worker's start goes, phase by phase
             step latency.log "$limit" "$PY" tests/benchmarks/worker_start.py --runs 5 ;;
        latency) machine latency.log
             step latency.log "$limit" "$PY" tests/benchmarks/owner_latency.py --runs 5 ;;
        mcp) machine mcp.log
             step mcp.log "$limit" "$PY" tests/benchmarks/mcp_session.py --json "$OUT/mcp_session.json" ;;
        memory) machine memory.log
             step memory.log "$limit" "$PY" tests/benchmarks/memory_footprint.py --bench --json "$OUT/memory_bench.json" ;;
        trust) machine corpus.log
             step corpus.log "$limit" "$PY" tests/benchmarks/corpus_table.py --gpumode "${CORPORA:?}/gpumode/problems/pmpp_v2" \
               --kernelbench "$CORPORA/kernelbench" --out /tmp/corpus --timeout 120 --ktui-only --ktui-arg=--bench-time \
               --ktui-arg=1 ${ONLY:-}
             cp /tmp/corpus/table.md "$OUT/corpus_table.md" 2>> "$OUT/corpus.log"
             tar -czf "$OUT/corpus_runs.tgz" -C /tmp/corpus . 2>> "$OUT/corpus.log" ;;
      esac
      echo "end: $name at ${SECONDS} s" >> "$OUT/queue.log"
    done
    # at most 8 files come back from a call: everything but queue.log and the archives goes into one
    (cd "$OUT" && files=$(ls | grep -v -e '^queue.log$' -e '\.tgz$') && [ -n "$files" ] \
      && tar -czf logs.tgz $files && rm -rf $files)
    ;;
  *)
    echo "usage: OUT=dir bash $0 part1|part2|part3|verify|commands|suite|stories|cute|audit|corpus|memory|trust|queue STEP..." >&2
    exit 2
    ;;
esac
