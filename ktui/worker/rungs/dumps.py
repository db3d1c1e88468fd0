"""Rung ``dumps``: write every intermediate the compiler produced, for humans and agents to read.

Files land in ``.ktui/runs/<kernel>/<version>/``: for Triton ``<fn>.ttir .ttgir .llir .ptx .cubin``,
for CuTeDSL ``<fn>.mlir .ptx .cubin``, for TileLang ``<fn>.tir .cu .ptx .cubin``, for all ``<fn>.sass`` (disassembled from the CUBIN) and
``resources.json`` with registers, spills, shared and local memory per GPU function, and
``hotspots.json``/``.txt``: the SASS instructions of each of the kernel's lines, by class
(``ktui.measure.hotspots``).

Writing them (and disassembling each CUBIN: ``nvdisasm`` and ``cuobjdump`` per function) takes longer than
most correctness checks, and nothing in a verdict depends on them, so ``start`` writes them on a
thread while the checks run and ``Dumps.finish`` — the rung itself — waits for that thread, says
what was written, and comes before any benchmark is timed.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from ktui.measure import hotspots, sass
from ktui.protocol.events import ArtifactWritten
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure
from ktui.worker.outcome import Outcome

DUMP_SUFFIXES = {".ttir", ".ttgir", ".llir", ".ptx", ".cubin", ".sass", ".mlir", ".tir", ".cu"}
REPLACED = {"resources.json", hotspots.JSON_FILE, hotspots.TEXT_FILE}


class Dumps:
    """The dumps of one run, written on their own thread; ``finish`` is the rung."""

    def __init__(self, ctx: RunContext):
        self._compiled = list(ctx.compiled)  # later rungs may compile more: these are the compile rung's
        self._run_dir = Path(ctx.job.run_dir)
        self._source = (Path(ctx.job.kernel_path).name, ctx.job.source)
        self._written: list[tuple[str, Path, str]] = []
        self._outcome: Outcome | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._write, name="ktui-dumps", daemon=True)
        self._thread.start()

    def finish(self, ctx: RunContext) -> Outcome:
        self._thread.join()
        for kind, path, function in self._written:  # events leave from the ladder's thread only
            _emit(ctx, kind, path, function)
        if self._error is not None:
            raise self._error
        return self._outcome

    def _write(self) -> None:
        try:
            self._outcome = write(self._compiled, self._run_dir, self._written, *self._source)
        except BaseException as exc:  # told by ``finish``, as any rung's failure
            self._error = exc


def start(ctx: RunContext) -> Dumps:
    return Dumps(ctx)


def write(compiled_functions: list, run_dir: Path, written_files: list[tuple[str, Path, str]],
          source_name: str = "", source_text: str = "") -> Outcome:
    """Write the dumps of ``compiled_functions`` into ``run_dir``; each file is noted in ``written_files``.
    ``source_name`` and ``source_text`` (the kernel file's name and text) give the hot spots."""
    if not compiled_functions:
        raise RungFailure("nothing was compiled")
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in run_dir.iterdir():  # a re-run of the same version replaces its dumps…
        if stale.is_file() and (stale.suffix in DUMP_SUFFIXES or stale.name in REPLACED):
            stale.unlink()  # …and keeps the rest: its source, its profiles (ncu.json, .ncu-rep…)

    resources: dict[str, dict] = {}
    per_line: list = []
    written = 0
    used = _unique_stems(compiled_functions)
    for compiled, stem in zip(compiled_functions, used):
        for ext, content in compiled.artifacts.items():
            path = run_dir / f"{stem}.{ext}"
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
            written_files.append((ext, path, compiled.name))
            written += 1
        entry: dict = {"dsl": compiled.dsl, "source_fn": compiled.source_fn, **compiled.metadata}
        cubin = run_dir / f"{stem}.cubin"
        if cubin.exists():
            with_lines = sass.disassemble(cubin, line_info=True)  # one tool process: both listings
            listing = sass.without_line_info(with_lines)
            sass_path = run_dir / f"{stem}.sass"
            sass_path.write_text(listing, encoding="utf-8")
            written_files.append(("sass", sass_path, compiled.name))
            written += 1
            functions = sass.split_functions(listing)
            if source_name:
                per_line += hotspots.build(cubin, source_name, source_text, with_lines)
            for fn, usage in sass.resource_usage(cubin).items():
                lines = functions.get(fn, [])
                resources[fn] = {
                    **entry,
                    **usage,
                    "spill_instructions": sass.spill_instructions(sass.opcode_counts(lines)),
                    "instructions": sass.instruction_count(lines),
                    "file_stem": stem,
                }
        else:
            resources[compiled.name] = {**entry, "file_stem": stem}

    res_path = run_dir / "resources.json"
    res_path.write_text(json.dumps(resources, indent=2, default=str), encoding="utf-8")
    written_files.append(("resources", res_path, ""))
    if per_line:
        for path in hotspots.write(run_dir, hotspots.to_json(per_line, source_name)):
            written_files.append(("hotspots", path, ""))
            written += 1
    figures = {
        "dir": str(run_dir),
        "files": written + 2,
        "functions": {
            fn: {k: r[k] for k in ("registers", "shared", "local", "spill_instructions", "instructions") if k in r}
            for fn, r in resources.items()
        },
    }
    summary = "; ".join(
        f"{r['file_stem']}: {r.get('registers', '?')} regs, {r.get('shared', '?')} B smem, "
        f"{r.get('spill_instructions', 0)} spill instr"
        for r in resources.values()
    )
    return Outcome(figures=figures, message=summary)


def _unique_stems(compiled: list) -> list[str]:
    """File stems, suffixed when one function was built twice (two specialisations).

    Triton's symbol is the kernel's Python name; CuTeDSL's is mangled with every argument
    type (``kernel_cutlass_add_kernel_tensorptrf32gmemalign16o…``) and TileLang's is
    ``main_kernel`` for every kernel, so their files are named after the user's Python function.
    """
    stems, seen = [], {}
    for c in compiled:
        base = c.name if c.dsl == "triton" else c.source_fn.replace(".", "_")
        n = seen.get(base, 0)
        seen[base] = n + 1
        stems.append(base if n == 0 else f"{base}.{n}")
    return stems


def _emit(ctx: RunContext, kind: str, path: Path, function: str) -> None:
    ctx.emit(ArtifactWritten(ctx.job.run_id, kind=kind, path=str(path), function=function, bytes=path.stat().st_size))
