"""A compiler's own words, out of the text a DSL wraps them in: what a failed compile says first.

The DSLs raise their compilers' failures with the cause buried: TileLang puts nvcc's output after
the whole generated CUDA source (whose first line, ``#if defined(_MSC_VER) …``, is all a one-line
view showed), Triton puts ptxas's errors after ``PTXAS error: Internal Triton PTX codegen error``,
and TileLang's lowering and CuTeDSL's IR verification point into the user's file in a rendered
``--> file:line:col`` that the Python traceback does not (it ends at the call that compiled).

Text only: nothing here imports a DSL, so each adapter calls it on ``str(exc)`` and the tests feed
it the outputs recorded from real failing compiles (``tests/fixtures/compile_errors/``).
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_LINES = 4  # error lines kept: the first is the cause, later ones often its echoes
# nvcc and the host compiler it drives: ``x.cu(19): error: …``, ``x.h:4492:10: fatal error: …``, ``nvcc fatal   : …``
_NVCC_ERROR = re.compile(r"^(?P<where>\S.*?)?:?\s*(?P<kind>fatal error|error|catastrophic error)\s*:\s*(?P<what>.+)$")
_NVCC_FATAL = re.compile(r"^nvcc fatal\s*:\s*(?P<what>.+)$")
# ptxas: ``ptxas /tmp/x.ptx, line 107; error   : Unknown modifier '.bogus'``
_PTXAS_ERROR = re.compile(r"^ptxas\S*\s+(?P<file>\S+), line (?P<line>\d+); error\s*:\s*(?P<what>.+)$")
# TileLang's lowering, CuTeDSL's IR verification: ``  --> /path/kernel.py:95:8``
_POINTER = re.compile(r"-->\s+(?P<file>[^\s:]+\.py):(?P<line>\d+)(?::(?P<col>\d+))?")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Headers of CUDA's CCCL (libcu++, CUB, Thrust): missing when a toolkit (pip's nvidia-cuda-nvcc) lacks them.
_CCCL = re.compile(r"fatal error: (nv/|cuda/|cub/|thrust/)\S*: No such file")
CCCL_HINT = ("nvcc's CUDA toolkit has no CCCL headers (nv/, cuda/): pip install nvidia-cuda-cccl, or point "
             "CUDA_HOME at a complete toolkit")
NVCC_SECTION = "\nCompilation error:\n"  # tilelang.contrib.nvcc: the source, then this, then nvcc's output


def nvcc_message(text: str) -> str | None:
    """nvcc's error lines in a TileLang compile failure (``RuntimeError(source + "Compilation error:" +
    output)``), each with the generated line it names; None when ``text`` holds no nvcc output."""
    if NVCC_SECTION not in text:
        return None
    source, _, rest = text.partition(NVCC_SECTION)
    output = rest.split("\nCommand: ", 1)[0]
    generated = source.splitlines()
    said: list[str] = []
    for line in _ANSI.sub("", output).splitlines():
        fatal = _NVCC_FATAL.match(line.strip())
        found = None if fatal else _NVCC_ERROR.match(line.strip())
        if fatal:
            said.append(f"nvcc fatal: {fatal['what'].strip()}")
        elif found and found["where"]:
            said.append(f"{_short_place(found['where'])}: {found['kind']}: {found['what'].strip()}")
            quoted = _generated_line(found["where"], generated)
            if quoted:
                said.append(f"    {quoted}")
        if len([s for s in said if not s.startswith("    ")]) >= MAX_LINES:
            break
    if not said:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        return "nvcc failed" + (f": {lines[-1]}" if lines else " and said nothing")
    message = "nvcc: " + "\n".join(said)
    return f"{message}\n{CCCL_HINT}" if _CCCL.search(output) else message


def ptxas_message(text: str) -> str | None:
    """ptxas's own errors in a Triton failure, each once (``line 107: Unknown modifier '.bogus'``)."""
    seen: dict[str, list[str]] = {}
    for line in _ANSI.sub("", text).splitlines():
        found = _PTXAS_ERROR.match(line.strip())
        if found:
            seen.setdefault(found["what"].strip(), []).append(found["line"])
    if not seen:
        return None
    said = [f"{what} (PTX line {', '.join(lines[:3])}{' …' if len(lines) > 3 else ''})"
            for what, lines in list(seen.items())[:MAX_LINES]]
    return "ptxas: " + "; ".join(said)


def pointer(text: str, user_files: set[str]) -> tuple[str, int, int | None] | None:
    """Where a compiler's rendered error points in one of ``user_files`` (resolved paths):
    ``(file, line, col)``, the first such pointer; None when it points at none of them."""
    for found in _POINTER.finditer(_ANSI.sub("", text)):
        try:
            file = str(Path(found["file"]).resolve())
        except OSError:
            continue
        if file in user_files:
            return file, int(found["line"]), int(found["col"]) if found["col"] else None
    return None


def first_words(text: str) -> str:
    """The compiler's first statement, its continuation lines joined (TVM's ``StructuralEqual check
    failed, caused by lhs at …: (256,) and rhs at …: (128,)``), up to the rendered pointer or a
    blank line; the Python source a DSL prints after it is left out."""
    lines = _ANSI.sub("", text).strip().splitlines()
    kept: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith(("-->", "|", "Traceback")) or _looks_like_code(stripped):
            if kept:
                break
            continue
        kept.append(stripped)
        if len(kept) >= MAX_LINES:
            break
    return " ".join(kept)


def _looks_like_code(line: str) -> bool:
    return line.startswith(("@", "def ", "import ", "from ", "#", "with ", "for ", "return "))


def _short_place(where: str) -> str:
    """``/tmp/…/tvm_kernels.cu(19)`` → ``tvm_kernels.cu(19)``: the file's name, where it is is noise."""
    return Path(where.strip()).name if "/" in where else where.strip()


def _generated_line(where: str, generated: list[str]) -> str:
    """The generated source's line nvcc names as ``tvm_kernels.cu(19)`` or ``tvm_kernels.cu:19:5``."""
    found = re.search(r"tvm_kernels\.cu(?:\((\d+)\)|:(\d+))", where)
    if not found:
        return ""
    number = int(found.group(1) or found.group(2))
    return generated[number - 1].strip()[:200] if 0 < number <= len(generated) else ""
