"""ktui's commands and their one-line summaries, in the order ``ktui --help`` lists them: the one
place each summary is written (the listing shows it without importing the command's module; the
module's own parser uses it when the command runs)."""

from __future__ import annotations

COMMANDS = {
    "run": "run kernel files or folders once: compile, check, time, a verdict each",
    "calibrate": "measure this GPU's launch floor, bandwidth and matmul rates again (the first benchmark does it once)",
    "watch": "watch a workspace and run a kernel again on every save (the dashboard)",
    "init": "create a workspace: kernels/, references/, context/, AGENTS.md",
    "context": "material for agents in context/: add sources, search them",
    "history": "list the stored versions of a kernel",
    "diff": "SASS diff of a kernel's version against an earlier one",
    "pin": "pin a version of a kernel as its diff baseline",
    "profile": "profile a kernel on one benchmark shape with Nsight Compute (GPU)",
    "sanitize": "run a kernel's first test shape under compute-sanitizer (GPU)",
    "mcp": "serve ktui's runs and tools to coding agents over MCP (stdio); needs the [mcp] extra",
    "audit": "test a problem's tests: trivial mutant kernels and the reference itself → strong or weak",
    "remote": "remote GPU hosts reached over ssh",
    "serve": "own a workspace's GPUs: other ktui commands of it run on this warm worker, one run per GPU at a time",
}
