"""``ktui sanitize``: the kernel's first test shape under ``compute-sanitizer``, errors by kernel.

For the version that fails with "an illegal memory access was encountered": memcheck names the
kernel, the access, the thread and block and (with line info, which Triton emits) the source line;
racecheck finds shared-memory races. PyTorch's caching allocator is switched off in the target
(``PYTORCH_NO_CUDA_MEMORY_CACHING=1``) so each tensor is its own allocation and an access past its
end is out of bounds for the tool too, instead of landing in a neighbour inside one cached block.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ktui.profiling.external import (
    Progress,
    ToolFailed,
    describe_exit,
    find,
    preflight,
    prepare,
    require_gpu,
    require_loaded,
    require_visible_gpu,
    tool_env,
)
from ktui.profiling.hosts import LocalHost, ToolHost
from ktui.profiling.ncu import shape_text

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
SANITIZER_PATTERNS = ("/usr/local/cuda-*/bin/compute-sanitizer", "/usr/local/cuda*/compute-sanitizer/compute-sanitizer",
                      "/opt/nvidia/compute-sanitizer*/compute-sanitizer")
SANITIZER_MISSING = (
    "compute-sanitizer is not installed or not found: looked at $KTUI_COMPUTE_SANITIZER, PATH, $CUDA_HOME/bin and "
    "/usr/local/cuda/bin. It ships with the CUDA toolkit (/usr/local/cuda/bin/compute-sanitizer); put it on PATH "
    "or set KTUI_COMPUTE_SANITIZER=/path/to/compute-sanitizer."
)
FIRST_ERRORS = 5
DEFAULT_TIMEOUT_S = 600.0
SUMMARY_FILE = "sanitize.json"
LOG_FILE = "sanitize.log"

_PREFIX = re.compile(r"^========= ?")
_AT = re.compile(r"\bat (?:0x[0-9a-fA-F]+ in )?([\w$.:<>~]+?)\+0x[0-9a-fA-F]+(?: in (.+?:\d+))?")
_THREAD = re.compile(r"by thread \(([^)]*)\) in block \(([^)]*)\)")
_SUMMARY = re.compile(r"(ERROR|RACECHECK) SUMMARY: (\d+) (?:error|hazard)")
_NOT_AN_ERROR = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY", "Target application returned")


@dataclass
class SanitizerError:
    message: str  # the tool's headline: "Invalid __global__ read of size 4 bytes"
    kernel: str = ""  # GPU function symbol
    source_fn: str = ""  # the user's Python function, where known
    location: str = ""  # file:line, when the kernel carries line info
    thread: str = ""
    block: str = ""
    details: list[str] = field(default_factory=list)


@dataclass
class SanitizeReport:
    kernel: str
    version: int
    tool: str
    shape: dict
    device: str
    error_count: int
    errors: list[SanitizerError]
    log_path: str
    clean: bool

    def to_json(self) -> dict:
        return asdict(self)

    def text(self) -> str:

        head = f"{self.kernel} v{self.version} · compute-sanitizer --tool {self.tool} · {shape_text(self.shape)} · {self.device}"
        if self.clean:
            return f"{head}\nno errors"
        lines = [head, f"{self.error_count} error(s); the first {len(self.errors)}:"]
        for e in self.errors:
            where = e.source_fn or e.kernel or "outside any kernel"
            lines.append(f"- {where}: {e.message}")
            if e.location:
                lines.append(f"    at {e.location}")
            if e.thread:
                lines.append(f"    thread ({e.thread}) in block ({e.block})")
            lines.extend(f"    {d}" for d in e.details[:3])
        lines.append(f"full output: {self.log_path}")
        return "\n".join(lines)


def parse_output(text: str, known: dict[str, str] | None = None, limit: int = FIRST_ERRORS) -> tuple[int, list[SanitizerError]]:
    """compute-sanitizer's report → (error count, the first ``limit`` errors). ``known`` maps GPU
    symbols to the user's function names (CuTeDSL mangles its symbols)."""
    known = known or {}
    errors: list[SanitizerError] = []
    current: SanitizerError | None = None
    count = None
    in_backtrace = False
    for raw in text.splitlines():
        if not raw.startswith("========="):
            continue
        line = _PREFIX.sub("", raw)
        summary = _SUMMARY.search(line)
        if summary:
            count = int(summary.group(2))
            current = None
            continue
        if not line.strip():
            current = None
            continue
        if not line.startswith(" "):
            if line.startswith(_NOT_AN_ERROR):
                current = None
                continue
            current = SanitizerError(message=line.strip())
            errors.append(current)
            in_backtrace = False
            _locate(current, line, known)
            continue
        if current is None:
            continue
        detail = line.strip()
        if detail.startswith("Saved host backtrace") or detail.startswith("Host Frame"):
            in_backtrace = True
            continue
        if in_backtrace:
            continue
        if not _locate(current, detail, known):
            current.details.append(detail)
    total = count if count is not None else len(errors)
    return total, errors[:limit]


def _locate(error: SanitizerError, line: str, known: dict[str, str]) -> bool:
    """Fill kernel/location/thread from one line; True when the line said nothing else."""
    used = False
    at = _AT.search(line)
    if at and not error.kernel:
        error.kernel = at.group(1)
        error.source_fn = known.get(error.kernel, "")
        error.location = at.group(2) or ""
        used = line.strip().startswith("at ")
    thread = _THREAD.search(line)
    if thread and not error.thread:
        error.thread, error.block = thread.group(1), thread.group(2)
        used = True
    return used


def find_sanitizer(host: ToolHost | None = None) -> str:
    return find(host or LocalHost(), "compute-sanitizer", "KTUI_COMPUTE_SANITIZER", SANITIZER_PATTERNS,
                SANITIZER_MISSING)


def sanitize(path: Path, tool: str = "memcheck", timeout_s: float = DEFAULT_TIMEOUT_S,
             progress: Progress = lambda message: None, reference: Path | None = None,
             host: ToolHost | None = None) -> SanitizeReport:
    """The kernel file (judged by ``reference`` as in ``ktui run``) under compute-sanitizer, here or on ``host``."""
    if tool not in TOOLS:
        if host is not None:
            host.close()
        raise ToolFailed(f"unknown sanitizer tool {tool!r}: expected one of {', '.join(TOOLS)}")
    target = prepare(path, reference=reference, host=host)
    try:
        sanitizer = find_sanitizer(target.host)
        require_visible_gpu(target.host, "compute-sanitizer")
        progress(f"loading {target.kernel.id} v{target.job.version}{target.host.progress_suffix}")
        check = preflight(target, 0, tests=True)
        require_loaded(check)
        require_gpu(check, "compute-sanitizer", target.host.where)
        progress(f"running {target.kernel.id} v{target.job.version} under compute-sanitizer --tool {tool}")
        result_path = target.on_host("result.json")
        argv = [sanitizer, "--tool", tool, "--print-limit", "100",
                *target.argv("sanitize", result_path, shape=0)]
        run = target.host.run(argv, timeout_s, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", **tool_env(sanitizer)})
        target.host.collect()
        log = target.run_dir / LOG_FILE
        log.write_text(run.output)
        if run.timed_out:
            raise ToolFailed(f"compute-sanitizer exceeded its {timeout_s:g} s limit and was killed "
                             "(it slows kernels down a lot); allow more with --timeout SECONDS")
        result = target.result(result_path) or {}
        count, errors = parse_output(run.output, _symbol_names(target.run_dir))
        if not errors and "ERROR SUMMARY" not in run.output and "RACECHECK SUMMARY" not in run.output:
            raise ToolFailed(f"compute-sanitizer did not finish ({describe_exit(run.returncode)}):\n{run.tail()}")
        if not errors and not result.get("ok") and result.get("error"):
            errors = [SanitizerError(message=f"custom_kernel raised: {result['error']}")]
            count = max(count, 1)
        report = SanitizeReport(
            kernel=target.kernel.id, version=target.job.version, tool=tool, shape=check.get("shape", {}),
            device=check.get("device", ""), error_count=count, errors=errors, log_path=str(log), clean=not errors,
        )
        (target.run_dir / SUMMARY_FILE).write_text(json.dumps(report.to_json(), indent=2))
        return report
    finally:
        target.close()


def _symbol_names(run_dir: Path) -> dict[str, str]:
    """GPU symbol → the user's function, from the version's resources.json (when it was run)."""
    try:
        resources = json.loads((run_dir / "resources.json").read_text())
    except (OSError, ValueError):
        return {}
    return {name: str(entry.get("source_fn", "")) for name, entry in resources.items() if isinstance(entry, dict)}
