# Sourced on the GPU machine, from the repository root, after the staged pieces were parked in
# /tmp/keep by earlier calls (../shared/gpu/README.md): .gpu/b (the CuTeDSL library's second half)
# and, for TileLang, its archive. Installs what is staged into /tmp/site once and puts it on
# PYTHONPATH: .gpu/a (textual & co, CuTeDSL), the TileLang archive (from /tmp/keep or
# .whl/tilelang), and the MCP SDK's wheels (.whl/mcp or /tmp/keep/mcp). The GPU tier needs the MCP SDK
# too: without it pytest stops at collecting the modules that import `mcp` (tests/agents/test_mcp_*.py,
# and tests/worker/test_tilelang.py through ktui.agents), before any test runs.
#
#     source tests/benchmarks/gpu_stage.sh && OUT=... bash tests/benchmarks/gpu_session.sh queue ...
if [ -d .gpu/a ]; then
  # shellcheck disable=SC1091
  source .gpu/a/install.sh || return 1 2>/dev/null || exit 1
fi
archive=$(ls /tmp/keep/tilelang-site-py312.tar.xz .whl/tilelang/tilelang-site-py312.tar.xz 2>/dev/null | head -1)
if [ -n "$archive" ] && [ ! -f /tmp/site/.tilelang-ok ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('/tmp/site')" "$archive" \
    && touch /tmp/site/.tilelang-ok
fi
mcp=$(ls -d .whl/mcp /tmp/keep/mcp 2>/dev/null | head -1)
if [ -n "$mcp" ] && [ ! -f /tmp/site/.mcp-ok ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$mcp"/*.whl && touch /tmp/site/.mcp-ok
fi
case ":${PYTHONPATH:-}:" in *":/tmp/site:"*) ;; *) export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" ;; esac
export PATH="/tmp/site/bin:$PATH"
