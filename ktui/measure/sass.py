"""SASS and resource usage from a CUBIN, with the NVIDIA binary tools.

The tools come from the CUDA toolkit when one is on PATH, else from the copies Triton's wheel
ships (``triton/backends/nvidia/bin``), so SASS is available on a machine with no GPU and no
toolkit. Nothing here imports torch or triton: the dashboard and ``ktui diff`` use it too.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from ktui.measure import tools

TOOL_TIMEOUT_S = 60


class ToolMissing(RuntimeError):
    pass


def find_tool(name: str) -> str:
    """Path of ``cuobjdump``/``nvdisasm``/``ptxas`` (see ``ktui.measure.tools``), or ToolMissing."""
    found = tools.find_tool(name)
    if found is None:
        raise ToolMissing(f"{name} not found: install the CUDA toolkit or Triton (whose wheel ships {name})")
    return found


class Started:
    """One tool process, started now and read later, so its work overlaps the caller's: an nvdisasm
    spends 0.3 s building its tables whatever the CUBIN, and the dumps write their other files and
    start the other CUBINs' tools meanwhile.

    The output goes to an unnamed temporary file, not a pipe: the dumps read it on a thread beside
    the worker's checks, and one read after the exit takes Python's lock once, where a pipe drained
    chunk by chunk waits for it at each chunk. The environment is passed as a copy taken here: the
    worker's other thread sets and unsets variables (``TRITON_INTERPRET`` around each interpreted
    call), and a child started with the inherited environment reads the C library's ``environ``
    after the fork, which a concurrent ``setenv`` may have freed — ``execve`` then fails with
    ``OSError: [Errno 14] Bad address``.
    """

    def __init__(self, args: list[str]):
        self.name = Path(args[0]).name
        self._out = tempfile.TemporaryFile()  # noqa: SIM115 (read and closed by output or close)
        try:
            self._proc = subprocess.Popen(args, stdout=self._out, stderr=subprocess.PIPE, env=dict(os.environ))
        except BaseException:
            self._out.close()
            raise

    def output(self) -> str:
        """What the tool printed; RuntimeError when it failed, ``subprocess.TimeoutExpired`` (the
        process killed) when it ran past ``TOOL_TIMEOUT_S``."""
        try:
            _, err = self._proc.communicate(timeout=TOOL_TIMEOUT_S)
            if self._proc.returncode != 0:
                message = err.decode(errors="replace").strip()[:500]
                raise RuntimeError(f"{self.name} failed ({self._proc.returncode}): {message}")
            self._out.seek(0)
            return self._out.read().decode(errors="replace")
        finally:
            self.close()

    def close(self) -> None:
        """Stop the tool if it still runs (a caller that gave up on it); idempotent."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()
        elif self._proc.stderr is not None and not self._proc.stderr.closed:
            self._proc.stderr.close()
        self._out.close()


def _run(args: list[str]) -> str:
    """Run one tool and return its output (``Started``)."""
    return Started(args).output()


def disassembly(cubin: Path, line_info: bool = False) -> Started:
    """``disassemble``, started: its ``output()`` is the listing."""
    return Started([find_tool("nvdisasm"), "-c", "-ndf", *(["-g"] if line_info else []), str(cubin)])


def disassemble(cubin: Path, line_info: bool = False) -> str:
    """SASS of every function in ``cubin`` with labels for branch targets (``nvdisasm -c``);
    ``line_info`` adds the source file and line before the instructions each covers (``-g``).

    ``-ndf`` leaves out nvdisasm's dataflow analysis, which infers the targets of jumps through the
    branch stack of GPUs before Volta; a Volta or later CUBIN prints the same listing without it, a
    quarter sooner (an nvdisasm of any CUBIN takes 0.3–0.4 s, and the dumps wait for it). The GPU
    tier compares the two on every shipped kernel's CUBIN (``tests/worker/test_confine_gpu.py``)."""
    return disassembly(cubin, line_info).output()


def without_line_info(listing: str) -> str:
    """``nvdisasm -c -g``'s listing as ``nvdisasm -c`` prints it. The ``//##`` lines naming a source
    file and line are all that ``-g`` adds, so the dumps disassemble each CUBIN once, not twice (on the
    H200 each nvdisasm of the shipped softmax took longer than its correctness checks)."""
    return "".join(line for line in listing.splitlines(keepends=True) if not line.lstrip().startswith("//##"))


_RES_FUNC = re.compile(r"^\s*Function\s+(\S+):\s*$")
_RES_FIELD = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")


def resource_usage(cubin: Path) -> dict[str, dict[str, int]]:
    """Per function: registers, stack, shared and local memory (bytes), from ``cuobjdump -res-usage``."""
    return parse_resource_usage(resource_listing(cubin).output())


def resource_listing(cubin: Path) -> Started:
    """``cuobjdump -res-usage``, started: ``parse_resource_usage`` reads its ``output()``."""
    return Started([find_tool("cuobjdump"), "-res-usage", str(cubin)])


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    usage: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        match = _RES_FUNC.match(line)
        if match:
            current = match.group(1)
            continue
        if current and "REG:" in line:
            fields = dict((k, int(v)) for k, v in _RES_FIELD.findall(line))
            usage[current] = {
                "registers": fields.get("REG", 0),
                "stack": fields.get("STACK", 0),
                "shared": fields.get("SHARED", 0),
                "local": fields.get("LOCAL", 0),
            }
            current = None
    return usage


_SECTION = re.compile(r"^\s*\.section\s+\.text\.(\S+?),")
# The opcode runs to the first blank: a warpgroup MMA's shape is in lower case (HGMMA.64x256x16.F32.BF16).
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)")


def split_functions(sass: str) -> dict[str, list[str]]:
    """nvdisasm output → {function: its lines}."""
    functions: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        match = _SECTION.match(line)
        if match:
            current = match.group(1)
            functions[current] = []
            continue
        if current is not None:
            functions[current].append(line)
    return functions


def opcode_counts(lines: list[str]) -> Counter:
    """Count instructions by full opcode (``LDG.E.128``, ``HGMMA.64x128x16.F32.BF16``…)."""
    counts: Counter = Counter()
    for line in lines:
        match = _INSTR.match(line)
        if match:
            counts[match.group(1)] += 1
    return counts


def spill_instructions(counts: Counter) -> int:
    """Local-memory loads and stores: spills (or arrays the compiler put in local memory)."""
    return sum(n for op, n in counts.items() if op.split(".")[0] in ("LDL", "STL"))


_LABEL = re.compile(r"^\s*(\.L\w+):\s*$")
_TRAP = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+BRA\s+`?\((\.L\w+)\)")


def instruction_count(lines: list[str]) -> int:
    """ktui's one "instruction count" of a function (the compile pane, the SASS diff, ``ktui diff``):
    its instructions up to the end of its code, so the NOP padding that aligns the function, the
    ``.L: BRA .L`` trap loop after the last ``EXIT`` and the end label are not counted."""
    items: list[tuple[str, str]] = []  # (opcode, trap target) or ("", label)
    for line in lines:
        label = _LABEL.match(line)
        if label:
            items.append(("", label.group(1)))
            continue
        match = _INSTR.match(line)
        if match:
            trap = _TRAP.match(line)
            items.append((match.group(1), trap.group(1) if trap else ""))
    end = len(items)

    def skip_padding(end: int) -> int:
        while end and items[end - 1][0] in ("", "NOP"):
            end -= 1
        return end

    end = skip_padding(end)
    if end >= 2 and items[end - 2][0] == "" and items[end - 1][0] == "BRA" and items[end - 1][1] == items[end - 2][1]:
        end = skip_padding(end - 2)
    return sum(1 for op, _ in items[:end] if op)
