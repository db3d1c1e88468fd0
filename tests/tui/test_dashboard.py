"""The dashboard driven with Textual's Pilot: real files, real saves, real worker processes."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, make_workspace
from rich.console import Console
from textual.widgets import DataTable, Static, TabbedContent

from ktui.protocol.job import Options
from ktui.tui.app import KtuiApp
from ktui.tui.panes.kernel_list import KernelList
from ktui.tui.panes.rungs import RungsPane
from ktui.watch.loop import WatchSettings
from ktui.workspace.folder import Workspace
from ktui.workspace.kernels import content_hash

ADD = (REPO / "kernels" / "add_triton.py").read_text()
HANG = (FIXTURES / "kernels" / "hang.py").read_text()


def save_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def plain(widget: Static, width: int = 120) -> str:
    with open(os.devnull, "w") as sink:
        console = Console(width=width, record=True, file=sink, color_system=None)
        console.print(widget.content)
        return console.export_text()


def row(app: KtuiApp, kernel_id: str) -> list[str]:
    table = app.query_one(KernelList)
    return [str(c) for c in table.get_row(kernel_id)]


async def until(pilot, predicate, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await pilot.pause(0.1)


def idle(app: KtuiApp) -> bool:
    q = app.state.queue
    return q.running is None and not q.queued and all(v.state not in ("queued", "running") for v in app.state.kernels.values())


def make_app(ws: Path, **settings) -> KtuiApp:
    return KtuiApp(Workspace.at(ws), Options(seed=0, timeouts={"compile": 120}),
                   WatchSettings(debounce_s=0.05, **{"audit": False, **settings}))


@pytest.mark.worker
def test_a_save_written_as_temp_file_and_rename_runs_and_updates_the_panes(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["compile_error"])

    async def scenario():
        app = make_app(ws)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: idle(app) and app.state.kernels["compile_error"].version == 1, what="catch-up")
            assert row(app, "compile_error")[0] == "✗ failed"
            app.query_one(KernelList).select("add_triton")
            await pilot.pause()
            # follow mode: the saved kernel gets selected; the panes show its new run
            save_atomically(ws / "kernels" / "compile_error.py", ADD)
            await until(pilot, lambda: app.selected == "compile_error", what="follow")
            await until(pilot, lambda: app.state.kernels["compile_error"].verdict == "passed"
                        and app.state.kernels["compile_error"].version == 2, what="the new run")
            # the panes are redrawn once per burst of events (a short timer after the last one)
            await until(pilot, lambda: "compile_error v2 passed" in plain(app.query_one("#rungs-head", Static)), what="the panes' redraw")
            assert row(app, "compile_error")[0] == "✓ passed" and row(app, "compile_error")[2] == "v2"
            assert "compiled cleanly for sm_90a in" in plain(app.query_one("#compile-body", Static))
            table = app.query_one("#rungs-table", DataTable)
            rungs = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)}
            assert rungs["compile"] == "✓ ok" and rungs["correctness[size=12345]"] == "✓ ok"
            assert "compile_error v2 passed" in plain(app.query_one("#rungs-head", Static))
            assert "STALE" not in plain(app.query_one("#status", Static))

    asyncio.run(scenario())


@pytest.mark.worker
def test_a_save_during_a_run_cancels_it_and_the_list_shows_the_new_verdict(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    kernel = ws / "kernels" / "add_slow.py"
    kernel.write_text(HANG)

    async def scenario():
        app = make_app(ws)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.state.kernels["add_slow"].rung == "compile", what="the hanging run")
            assert row(app, "add_slow")[0] == "▶ compile"
            stale_run = app.state.kernels["add_slow"].run_id
            save_atomically(kernel, ADD)
            await until(pilot, lambda: app.state.kernels["add_slow"].run_id not in ("", stale_run),
                        what="the replacement run")
            await until(pilot, lambda: app.state.kernels["add_slow"].verdict == "passed", what="its verdict")
            view = app.state.kernels["add_slow"]
            assert view.content_hash == content_hash(ADD.encode()) and not view.stale
            runs = app.store.runs("add_slow")
            assert [r.verdict for r in runs] == ["passed", "cancelled"]

    asyncio.run(scenario())


@pytest.mark.worker
def test_a_crashing_kernel_leaves_the_app_running_and_the_next_run_works(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["crash_segfault"])

    async def scenario():
        app = make_app(ws)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.state.kernels["crash_segfault"].verdict == "crashed", what="the crash")
            assert row(app, "crash_segfault")[0] == "✗ crashed"
            await pilot.press("2")
            await until(pilot, lambda: "SIGSEGV" in plain(app.query_one("#rungs-head", Static)) or
                        "SIGSEGV" in " ".join(str(c) for c in app.query_one("#rungs-table", DataTable).get_row_at(1)), what="the crash in the rungs pane")
            save_atomically(ws / "kernels" / "crash_segfault.py", ADD)
            await until(pilot, lambda: app.state.kernels["crash_segfault"].verdict == "passed", what="the fixed run")
            assert app.is_running

    asyncio.run(scenario())


@pytest.mark.worker
def test_keys_do_what_the_footer_says(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["compile_error"])

    async def scenario():
        app = make_app(ws)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: idle(app) and all(v.version for v in app.state.kernels.values()), what="catch-up")
            assert app.selected == "add_triton"
            # j / k move the selection
            await pilot.press("j")
            assert app.selected == "compile_error"
            await pilot.press("k")
            assert app.selected == "add_triton"
            await pilot.press("down")
            assert app.selected == "compile_error"
            # 1–5 switch the tab at this width, escape comes back to the list
            tabs = app.query_one(TabbedContent)
            for n in (2, 3, 4, 5, 1):
                await pilot.press(str(n))
                assert tabs.active == f"tab-{n}"
            await pilot.press("escape")
            assert isinstance(app.focused, KernelList)
            # f toggles follow
            await pilot.press("f")
            assert app.follow is False
            assert "follow off" in plain(app.query_one("#status", Static))
            # s toggles strict mode for the runs that start from now on
            await pilot.press("s")
            assert app.options.strict is True
            assert "strict" in plain(app.query_one("#status", Static))
            strict_before = len(app.store.runs("add_triton"))
            await pilot.press("k")
            await pilot.press("r")
            await until(pilot, lambda: len(app.store.runs("add_triton")) == strict_before + 1 and idle(app),
                        what="strict re-run")
            assert app.store.latest_run("add_triton").strict
            await pilot.press("s")
            assert app.options.strict is False
            await pilot.press("j")
            # d cycles the diff base
            bases = []
            for _ in range(3):
                await pilot.press("d")
                bases.append(app.diff_base)
            assert bases == ["best", "pinned", "previous"]
            # r re-runs the selected kernel (same content: same version, a new run)
            before = len(app.store.runs("compile_error"))
            await pilot.press("r")
            await until(pilot, lambda: len(app.store.runs("compile_error")) == before + 1 and idle(app), what="r")
            # R re-runs every kernel
            counts = {k: len(app.store.runs(k)) for k in ("add_triton", "compile_error")}
            await pilot.press("R")
            await until(pilot, lambda: idle(app) and all(len(app.store.runs(k)) == n + 1 for k, n in counts.items()),
                        what="R")
            # b pins the selected kernel's version as the diff baseline
            await pilot.press("b")
            assert app.store.pinned("compile_error") == 1 and app.diff_base == "pinned"
            # enter on a failed rung shows its traceback
            await pilot.press("2")
            table = app.query_one("#rungs-table", DataTable)
            table.move_cursor(row=1)  # compile
            await pilot.press("enter")
            assert app.query_one(RungsPane).expanded
            assert "Traceback" in plain(app.query_one("#rung-detail", Static))
            # ? opens the help, escape closes it
            await pilot.press("question_mark")
            assert app.screen.__class__.__name__ == "HelpScreen"
            await pilot.press("escape")
            assert app.screen.__class__.__name__ != "HelpScreen"
            # q quits
            await pilot.press("q")
            await pilot.pause(0.5)
        assert app.return_code in (0, None)

    asyncio.run(scenario())


@pytest.mark.worker
def test_an_empty_workspace_and_broken_files_show_messages_and_nothing_crashes(tmp_path):
    empty = tmp_path / "empty"
    (empty / "references").mkdir(parents=True)

    async def scenario():
        app = make_app(empty)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.5)
            assert "no kernels/ folder" in plain(app.query_one("#status", Static), width=400)
            # the folder appears, with a kernel whose reference does not exist and a syntax error
            (empty / "kernels").mkdir()
            await pilot.pause(0.5)
            save_atomically(empty / "kernels" / "nothing_here.py", "def custom_kernel(x):\n    return x\n")
            save_atomically(empty / "kernels" / "add_broken.py", "def custom_kernel(x:\n")
            await until(pilot, lambda: {"nothing_here", "add_broken"} <= set(app.state.kernels),
                        what="the new files in the list")
            await until(pilot, lambda: idle(app) and app.state.kernels["nothing_here"].verdict == "error",
                        what="the runs")
            app.query_one(KernelList).select("nothing_here")
            await pilot.pause()
            assert "no reference" in plain(app.query_one("#compile-body", Static))
            assert app.state.kernels["add_broken"].verdict in ("error", "failed")
            assert app.is_running

    asyncio.run(scenario())


@pytest.mark.worker
def test_a_kernel_file_named_in_bytes_that_are_not_utf8_is_shown_left_out_and_the_rest_runs(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    bad = os.fsdecode(os.fsencode(ws / "kernels") + b"/add_\xff.py")
    Path(bad).write_bytes((REPO / "kernels" / "add_triton.py").read_bytes())

    async def scenario():
        app = make_app(ws)
        async with app.run_test(size=(160, 30)) as pilot:
            await until(pilot, lambda: idle(app) and app.state.kernels["add_triton"].verdict == "passed",
                        what="the catch-up run")
            assert list(app.state.kernels) == ["add_triton"]
            assert "add_\\xff.py: left out: its name is not UTF-8" in plain(app.query_one("#status", Static), 400)
            assert app.is_running

    asyncio.run(scenario())

def _screen_colours(ws: Path) -> list[list[int]]:
    import re

    async def shoot() -> str:
        app = KtuiApp(Workspace.at(ws), live=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            return app.export_screenshot()

    svg = asyncio.run(shoot())
    # Text styles and cell backgrounds (not the window chrome Textual draws around them).
    colours = set(re.findall(r"-r\d+ \{ fill: #([0-9a-f]{6})", svg)) | set(re.findall(r'<rect fill="#([0-9a-f]{6})"', svg))
    assert len(colours) > 3, "no colours found in the screenshot"
    return [[int(c[i:i + 2], 16) for i in (0, 2, 4)] for c in colours]


@pytest.mark.unit
def test_no_color_turns_the_screen_monochrome(tmp_path, monkeypatch):
    ws = make_workspace(tmp_path / "ws", fixtures=["compile_error"])
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert any(max(ch) - min(ch) > 8 for ch in _screen_colours(ws))  # colour by default
    monkeypatch.setenv("NO_COLOR", "1")
    assert all(max(ch) - min(ch) <= 8 for ch in _screen_colours(ws))


@pytest.mark.worker
def test_p_runs_ktui_profile_and_its_answer_fills_the_ncu_pane(tmp_path):
    """``p`` runs ``python -m ktui profile PATH --json`` for real; without a GPU or ncu its answer
    is a failure that says why, and that answer is what the pane shows."""
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])

    async def scenario():
        app = make_app(ws)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: idle(app) and app.state.kernels["add_triton"].version == 1, what="catch-up")
            await pilot.press("p")
            assert app.query_one(TabbedContent).active == "tab-5"
            await until(pilot, lambda: (s := app.state.profiles.get("add_triton")) is not None and not s.running,
                        timeout=300, what="the profile's answer")
            status = app.state.profiles["add_triton"]
            await pilot.pause(0.2)
            shown = plain(app.query_one("#ncu-head", Static), width=400)
            assert status.message and status.message[:60] in shown.replace("\n", " ")
            if not status.ok:
                assert "last profile:" in shown

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_result_older_than_the_file_on_disk_is_marked_stale(tmp_path):
    from dashboard_fixture import replay_cpu_history

    ws, now = replay_cpu_history(tmp_path / "ws")
    kernel = ws / "kernels" / "add_triton.py"
    kernel.write_text(kernel.read_text() + "\n# edited while ktui was not watching\n")

    async def scenario():
        app = KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert row(app, "add_triton")[-1] == "stale" and row(app, "softmax_triton")[-1] == "2m"
            app._select("add_triton")
            await pilot.pause()
            assert "STALE" in plain(app.query_one("#status", Static), width=200)
            assert "results of v1 predate the kernel file on disk" in plain(app.query_one("#status", Static), width=200)
            app._select("softmax_triton")
            await pilot.pause()
            assert "STALE" not in plain(app.query_one("#status", Static), width=200)

    asyncio.run(scenario())


@pytest.mark.unit
def test_resizing_between_tabs_and_side_by_side_keeps_the_selection(tmp_path):
    from dashboard_fixture import replay_cpu_history

    from ktui.tui.dashboard import Dashboard

    ws, now = replay_cpu_history(tmp_path / "ws")

    async def scenario():
        app = KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app._select("compile_error")
            assert app.query(TabbedContent)
            await pilot.resize_terminal(160, 48)
            await pilot.pause(0.3)
            assert app.query_one(Dashboard).has_class("-wide") and not app.query(TabbedContent)
            assert app.selected == "compile_error" and app.query_one(KernelList).selected_id == "compile_error"
            assert "arange's range must be a power of 2" in plain(app.query_one("#compile-body", Static))
            await pilot.press("j")
            assert app.selected == "crash_segfault"
            await pilot.resize_terminal(80, 24)
            await pilot.pause(0.3)
            assert app.query(TabbedContent) and app.selected == "crash_segfault"

    asyncio.run(scenario())


@pytest.mark.worker
def test_a_shape_listed_twice_in_tests_gets_its_own_rung_and_the_dashboard_draws_both(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    reference = (ws / "references" / "add.py").read_text()
    start, end = reference.index("TESTS = ["), reference.index("]\n", reference.index("TESTS = [")) + 2
    (ws / "references" / "dup.py").write_text(reference[:start] + 'TESTS = [{"size": 8}, {"size": 8}]\n' + reference[end:])
    (ws / "kernels" / "add_dup.py").write_text(ADD.replace('REFERENCE = "add"', 'REFERENCE = "dup"'))

    async def scenario():
        app = make_app(ws)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: idle(app) and app.state.kernels["add_dup"].verdict == "passed", what="the run")
            await pilot.press("2")
            await until(pilot, lambda: app.query_one("#rungs-table", DataTable).row_count > 5,
                        what="the rungs pane")
            table = app.query_one("#rungs-table", DataTable)
            names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            assert "correctness[size=8]" in names and "correctness[size=8]#2" in names
            assert app.is_running

    asyncio.run(scenario())


@pytest.mark.worker
def test_a_cutedsl_kernel_only_compiled_on_the_cpu_tier_reads_compiled_not_passed(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_cutedsl"])

    async def scenario():
        app = make_app(ws)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: idle(app) and app.state.kernels["add_cutedsl"].verdict in ("passed", "compiled"),
                        what="the run")
            if app.state.tier != "cpu":
                return  # on a GPU its correctness is checked: a plain pass
            assert app.state.kernels["add_cutedsl"].verdict == "compiled"
            await until(pilot, lambda: row(app, "add_cutedsl")[0] == "◇ compiled", what="the list's label")

    asyncio.run(scenario())
