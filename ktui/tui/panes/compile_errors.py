"""Compile errors: the compiler's message at the user's file:line, with the source around it.

The source shown is the snapshot the worker ran (``<run_dir>/source.py``), so the line numbers
match even after the file was edited again; the line at fault is highlighted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ktui.tui.searchable import PaneText, TextPane
from ktui.tui.state import KernelView
from ktui.tui.text import rel
from ktui.tui.view import PaneView

CONTEXT = 4


class CompilePane(TextPane):
    BORDER_TITLE = "1 compile"
    view: reactive[PaneView | None] = reactive(None, always_update=True)

    def compose(self):
        yield PaneText(id="compile-body")

    def watch_view(self, view: PaneView | None) -> None:
        if view is not None:
            self.query_one("#compile-body", Static).update(render_compile(view.kernel, view.root))


def render_compile(view: KernelView | None, root: Path) -> RenderableType:
    if view is None:
        return Text("no kernel selected", style="dim")
    pre = view.find_rung("pre-checks")
    comp = view.find_rung("compile")
    if pre is None and comp is None:
        if view.problem:
            return Text(view.problem, style="bold")
        if view.state == "running":
            return Text("starting the worker…", style="dim")
        if view.state == "queued":
            return Text("queued: not compiled yet", style="dim")
        return Text("not compiled yet", style="dim")
    if pre is not None and pre["status"] != "ok":
        return _failure("pre-checks", pre, view, root)
    if comp is None:
        return Text(f"compiling for {view.arch or 'the target'}…", style="dim")
    if comp["status"] == "ok":
        return _clean(view, comp)
    if comp["status"] == "skipped":
        return Text(f"compile skipped: {comp['message']}", style="dim")
    return _failure("compile", comp, view, root)


def _clean(view: KernelView, comp: dict[str, Any]) -> RenderableType:
    figures = comp.get("figures") or {}
    arch = figures.get("arch") or view.arch
    seconds = figures.get("compile_s")
    when = ""
    if isinstance(seconds, (int, float)):
        when = f" in {seconds:.2f} s" if seconds < 1 else f" in {seconds:.1f} s"  # a cache hit takes 0.01 s
    lines = [Text(f"compiled cleanly for {arch}{when}", style="bold")]
    dumps = view.find_rung("dumps")
    functions = (dumps or {}).get("figures", {}).get("functions") or {}
    for name, res in functions.items():
        if not isinstance(res, dict):
            continue
        parts = [f"{res.get('registers', '?')} regs", f"{res.get('shared', 0)} B smem",
                 f"{res.get('spill_instructions', 0)} spill instr"]
        if res.get("instructions"):
            parts.append(f"{res['instructions']} instr, padding not counted")  # as the SASS diff counts
        line = Text("  ")
        line.append(_short(name), style="bold")
        line.append(": " + ", ".join(parts))
        lines.append(line)
    if dumps is not None and dumps["status"] not in ("ok", "skipped"):
        lines.append(Text(f"dumps {dumps['status']}: {dumps['message']}"))
    return Group(*lines)


def _failure(rung: str, record: dict[str, Any], view: KernelView, root: Path) -> RenderableType:
    error = record.get("error") or {}
    if error.get("type") and error.get("message"):
        message = f"{error['type']}: {error['message']}"
    else:
        message = record.get("message") or ""
    head = Text()
    head.append(f"{rung} {record['status'].replace('_', ' ')}: ", style="bold red")
    head.append(message, style="bold")
    parts: list[RenderableType] = [head]
    loc = error.get("location")
    if loc:
        where = f"at {rel(loc['file'], root)}:{loc['line']}" + (f":{loc['col']}" if loc.get("col") else "")
        parts.append(Text(where, style="italic"))
        code = _source(loc["file"], view)
        if code is not None:
            line = int(loc["line"])
            parts.append(Syntax(code, "python", theme="ansi_dark", line_numbers=True,
                                line_range=(max(1, line - CONTEXT), line + CONTEXT),
                                highlight_lines={line}, word_wrap=False))
        elif loc.get("excerpt"):
            parts.append(Text(loc["excerpt"]))
    elif record.get("message") and not _says_the_same(record["message"], message):
        parts.append(Text(record["message"]))
    return Group(*parts)


def _says_the_same(a: str, b: str) -> bool:
    """One message inside the other (``ReferenceError: X`` and ``X``): shown once, not twice."""
    a, b = a.strip(), b.strip()
    return bool(a) and bool(b) and (a in b or b in a)


def _source(file: str, view: KernelView) -> str | None:
    """The text the worker ran: the run's snapshot for the kernel file, else the file as it is."""
    candidates = []
    if view.run_dir and Path(file).resolve() == Path(view.path).resolve():
        candidates.append(Path(view.run_dir) / "source.py")
    candidates.append(Path(file))
    for path in candidates:
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return None


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
