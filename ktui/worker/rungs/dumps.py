"""Rung ``dumps``: write every intermediate the compiler produced, for humans and agents to read.

Files land in ``.ktui/runs/<kernel>/<version>/``: the compiler's outputs of each function, named
by its DSL's row of ``ktui.protocol.dsls`` (Triton ``<fn>.ttir .ttgir .llir .ptx .cubin``, CuTeDSL
``<fn>.mlir .ptx .cubin``, TileLang ``<fn>.tir .cu .ptx .cubin``), ``<fn>.sass`` disassembled from a CUBIN, and
``resources.json`` with registers, spills, shared and local memory per GPU function, and
``hotspots.json``/``.txt``: the SASS instructions of each of the kernel's lines, by class
(``ktui.measure.hotspots``).

Writing them (and disassembling each CUBIN: ``nvdisasm`` and ``cuobjdump`` per function) takes longer than
most correctness checks, and no check reads what they contain, so ``start`` writes them on a
thread while the checks run and ``Dumps.finish`` — the rung itself — waits for that thread, says
what was written, and comes before any benchmark is timed. On the thread, each CUBIN's tools start
as soon as it is written, several CUBINs' at once (``write``): an nvdisasm spends 0.3 s or more on
its start whatever the CUBIN, and after the compile that is what a save's verdict waits for.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktui.measure import hotspots, sass
from ktui.protocol import dsls
from ktui.protocol.events import ArtifactWritten
from ktui.worker.context import RunContext
from ktui.worker.dsl.registry import by_name
from ktui.worker.errors import RungFailure
from ktui.worker.outcome import Outcome
from ktui.worker.phases import Phases

DUMP_SUFFIXES = dsls.dump_suffixes()  # every DSL's (``ktui.protocol.dsls``): a re-run replaces them
REPLACED = {"resources.json", hotspots.JSON_FILE, hotspots.TEXT_FILE}


class Dumps:
    """The dumps of one run, written on their own thread; ``finish`` is the rung."""

    def __init__(self, ctx: RunContext):
        self._compiled = list(ctx.compiled)  # later rungs may compile more: these are the compile rung's
        self._run_dir = Path(ctx.job.run_dir)
        self._source = (Path(ctx.job.kernel_path).name, ctx.job.source)
        self._written: list[tuple[str, Path, str]] = []
        self._phases = Phases()  # the thread's own: the ladder's belongs to the rung that runs meanwhile
        self._outcome: Outcome | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._write, name="ktui-dumps", daemon=True)
        self._thread.start()

    def finish(self, ctx: RunContext) -> Outcome:
        with ctx.phases.timing("wait"):  # what the checks did not cover: the dumps' share of a save's wait
            self._thread.join()
        ctx.phases.add(self._phases.take())
        for kind, path, function in self._written:  # events leave from the ladder's thread only
            _emit(ctx, kind, path, function)
        if self._error is not None:
            raise self._error
        return self._outcome

    def _write(self) -> None:
        try:
            self._outcome = write(self._compiled, self._run_dir, self._written, *self._source, phases=self._phases)
        except BaseException as exc:  # told by ``finish``, as any rung's failure
            self._error = exc


def start(ctx: RunContext) -> Dumps:
    return Dumps(ctx)


# CUBINs whose tools run at once: each nvdisasm holds about 55 MB while it builds its tables.
TOOLS_AT_ONCE = 4


@dataclass
class _Disassembly:
    """One CUBIN's tools, started (its listing with line information, its resource usage), and
    the slot of ``resources`` its functions fill."""

    compiled: Any
    stem: str
    entry: dict
    cubin: Path
    slot: dict[str, dict]
    listing: sass.Started
    usage: sass.Started

    def close(self) -> None:
        self.listing.close()
        self.usage.close()


def write(compiled_functions: list, run_dir: Path, written_files: list[tuple[str, Path, str]],
          source_name: str = "", source_text: str = "", phases: Phases | None = None) -> Outcome:
    """Write the dumps of ``compiled_functions`` into ``run_dir``; each file is noted in ``written_files``.
    ``source_name`` and ``source_text`` (the kernel file's name and text) give the hot spots; ``phases``
    (when given) takes the seconds spent writing ``files``, waiting for the ``tools`` and in ``analysis``.

    Each CUBIN's nvdisasm and cuobjdump start as soon as it is written (``TOOLS_AT_ONCE`` CUBINs at a
    time), so a tool's start-up overlaps the other files and the other CUBINs' tools."""
    if not compiled_functions:
        raise RungFailure("nothing was compiled")
    phases = phases or Phases()
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in run_dir.iterdir():  # a re-run of the same version replaces its dumps…
        if stale.is_file() and (stale.suffix in DUMP_SUFFIXES or stale.name in REPLACED):
            stale.unlink()  # …and keeps the rest: its source, its profiles (ncu.json, .ncu-rep…)

    slots: list[dict[str, dict]] = []  # each compiled function's resources, in the functions' order
    per_line: list = []
    written = 0
    in_flight: deque[_Disassembly] = deque()

    def read_oldest() -> None:
        nonlocal per_line, written
        per_line += _read(in_flight[0], run_dir, written_files, source_name, source_text, phases)
        in_flight.popleft()  # only once read: a failure leaves it to the ``finally`` below
        written += 1

    try:
        for compiled, stem in zip(compiled_functions, _unique_stems(compiled_functions)):
            entry: dict = {"dsl": compiled.dsl, "source_fn": compiled.source_fn, **compiled.metadata}
            slots.append({})
            with phases.timing("files"):
                written += _write_artifacts(compiled, stem, run_dir, written_files)
            cubin = run_dir / f"{stem}.cubin"
            if not cubin.exists():
                slots[-1][compiled.name] = {**entry, "file_stem": stem}
                continue
            if len(in_flight) == TOOLS_AT_ONCE:
                read_oldest()
            in_flight.append(_Disassembly(compiled, stem, entry, cubin, slots[-1],
                                          sass.disassembly(cubin, line_info=True), sass.resource_listing(cubin)))
        while in_flight:
            read_oldest()
    finally:
        for started in in_flight:  # a failure above: no tool outlives the rung
            started.close()

    resources = {fn: r for slot in slots for fn, r in slot.items()}
    with phases.timing("files"):
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


def _write_artifacts(compiled: Any, stem: str, run_dir: Path, written_files: list[tuple[str, Path, str]]) -> int:
    """The compiler's own outputs of one function (``<stem>.ptx``, ``.cubin``…); how many were written."""
    for ext, content in compiled.artifacts.items():
        path = run_dir / f"{stem}.{ext}"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        written_files.append((ext, path, compiled.name))
    return len(compiled.artifacts)


def _read(started: _Disassembly, run_dir: Path, written_files: list[tuple[str, Path, str]], source_name: str,
          source_text: str, phases: Phases) -> list:
    """One CUBIN's ``.sass`` and its functions' resources (into its slot); its hot spots."""
    with phases.timing("tools"):
        try:
            with_lines = started.listing.output()
            usage = sass.parse_resource_usage(started.usage.output())
        finally:
            started.close()
    with phases.timing("analysis"):
        listing = sass.without_line_info(with_lines)
        sass_path = run_dir / f"{started.stem}.sass"
        sass_path.write_text(listing, encoding="utf-8")
        written_files.append(("sass", sass_path, started.compiled.name))
        functions = sass.split_functions(listing)
        for fn, figures in usage.items():
            lines = functions.get(fn, [])
            started.slot[fn] = {
                **started.entry,
                **figures,
                "spill_instructions": sass.spill_instructions(sass.opcode_counts(lines)),
                "instructions": sass.instruction_count(lines),
                "file_stem": started.stem,
            }
        return hotspots.build(started.cubin, source_name, source_text, with_lines) if source_name else []


def _unique_stems(compiled: list) -> list[str]:
    """File stems, suffixed when one function was built twice (two specialisations).

    Each DSL's adapter says what names them (``Dsl.dump_stem``): Triton's symbol is the kernel's
    Python name; CuTeDSL's is mangled with every argument type
    (``kernel_cutlass_add_kernel_tensorptrf32gmemalign16o…``) and TileLang's is ``main_kernel`` for
    every kernel, so their files are named after the user's Python function.
    """
    stems, seen = [], {}
    for c in compiled:
        base = by_name(c.dsl).dump_stem(c)
        n = seen.get(base, 0)
        seen[base] = n + 1
        stems.append(base if n == 0 else f"{base}.{n}")
    return stems


def _emit(ctx: RunContext, kind: str, path: Path, function: str) -> None:
    ctx.emit(ArtifactWritten(ctx.job.run_id, kind=kind, path=str(path), function=function, bytes=path.stat().st_size))
