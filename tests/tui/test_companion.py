"""Living beside the dashboard all day: what a user sees at 160, 80, 60 and 40 columns, printed
output, the history list, the footer, and the keys that hand things to the user's tools."""

from __future__ import annotations

import asyncio

import pytest
from dashboard_fixture import replay_cpu_history
from textual.widgets import DataTable, TabbedContent

from ktui.protocol.events import RunFinished, RungFinished, RungStarted, RunStarted
from ktui.tui.app import KtuiApp, WatchItem
from ktui.tui.key_bar import KeyBar
from ktui.tui.panes.history import _head
from ktui.tui.panes.kernel_list import KernelList
from ktui.tui.panes.output import printed
from ktui.tui.panes.rungs import _rows
from ktui.tui.panes.status_bar import StatusBar, StatusInfo
from ktui.tui.state import KernelView
from ktui.tui.text import device_text
from ktui.tui.versions import VersionPoint
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.unit


def viewer(tmp_path):
    ws, now = replay_cpu_history(tmp_path / "ws")
    return KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
def test_the_rungs_pane_shows_every_figure_and_whole_names_and_statuses(tmp_path, size):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            app._select("softmax_triton")
            app.action_pane(2)
            await pilot.pause()
            table = app.query_one("#rungs-table", DataTable)
            widths = {key.value: col.width for key, col in table.columns.items()}
            rows = [table.get_row_at(i) for i in range(table.row_count)]
            for rung, status, _ in rows:  # a long shape name wraps at its commas, never cut
                assert all(len(line.plain) <= widths["rung"] for line in rung.wrap(app.console, widths["rung"]))
                assert len(status.plain) <= widths["status"]
            names = {r[0].plain.replace(", ", ",") for r in rows}
            shown = {r["rung"] for r in app.state.kernels["softmax_triton"].rungs if r["status"] != "skipped"}
            assert shown <= names
            checks = [r for r in rows if r[0].plain.startswith("correctness[")]
            assert checks
            for _, _, figures in checks:  # wrapped onto more lines, never cut
                assert "psnr=" in figures.plain and "cossim=" in figures.plain
                lines = figures.wrap(app.console, widths["figures"])
                assert all(len(line.plain) <= widths["figures"] for line in lines)

    asyncio.run(scenario())


def test_the_status_line_keeps_the_modes_at_80_columns_whatever_the_rest_says(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            bar = app.query_one(StatusBar)
            bar.info = StatusInfo(tier="cpu", device="CPU (Triton interpreter)", arch="sm_90a", running="softmax_triton",
                                  running_rung="correctness 3/6", queued=4, watcher="inotify", follow=True, strict=True,
                                  note="a long note about the workspace that would take the whole line by itself")
            await pilot.pause()
            text = bar._text(bar.info).plain
            assert len(text) <= bar.content_size.width
            assert text.endswith("watch: inotify │ follow │ strict")
            assert "…" in text  # the rest gave way

    asyncio.run(scenario())


@pytest.mark.parametrize("width", [160, 80, 60, 40])
def test_the_footer_shows_whole_keys_and_always_help_and_quit(width):
    from ktui.tui.app import KtuiApp as App

    line = KeyBar(App.BINDINGS).line(width - 2).plain
    assert len(line) <= width - 2
    assert "? help" in line and "q quit" in line
    words = line.split("  ")
    labels = {f"{b.key_display or b.key} {b.description}" for b in KeyBar(App.BINDINGS).bindings}
    assert all(w in labels for w in words), words  # no fragment like "s stri"


def test_the_history_list_always_names_the_current_version_and_never_breaks_inside_one():
    points = [VersionPoint(version=v, verdict="passed" if v % 3 else "failed", speedup=None, roofline=None,
                           tier="cpu", finished=float(v)) for v in range(1, 21)]
    text = _head(points, [], current=3).plain
    assert "v3\u00a0" in text and "v20\u00a0" in text
    assert "v12 " not in text  # inside one item the spaces do not break


def test_the_output_pane_shows_what_the_run_printed_live_and_from_the_run_folder(tmp_path):
    live = KernelView(id="k", path="k.py", reference="", version=2, state="running", run_id="r1")
    live.output = ["step 1", "step 2"]
    head, lines = printed(live)
    assert lines == ["step 1", "step 2"] and "(running)" in head.plain
    (tmp_path / "output.txt").write_text("done\n")
    finished = KernelView(id="k", path="k.py", reference="", version=2, state="passed", run_dir=str(tmp_path))
    assert printed(finished)[1] == ["done"]


def test_runs_of_skipped_rungs_with_one_reason_are_one_row():
    view = KernelView(id="k", path="k.py", reference="", version=1, state="failed")
    view.rungs = [{"rung": "compile", "status": "failed", "message": "boom"}] + [
        {"rung": f"correctness[n={n}]", "status": "skipped", "message": "compile failed"} for n in range(5)]
    rows = _rows(view)
    assert [r["rung"] for r in rows] == ["compile", "correctness ×5"]
    assert rows[1]["status"] == "skipped" and rows[1]["message"] == "compile failed"


def test_after_a_failure_past_compile_the_rungs_tab_comes_forward_with_the_failure_selected(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app._select("add_triton")
            app.action_pane(1)
            await pilot.pause()
            view = app.state.kernels["add_triton"]
            # its run, failing past compile this time (a wrong answer on the second shape)
            view.rungs = [{**r, "status": "failed", "message": "1/1 elements beyond atol"}
                          if r["rung"] == view.rungs[6]["rung"] else r for r in view.rungs]
            app.post_message(WatchItem(RunFinished(view.run_id, verdict="failed", message="wrong")))
            await pilot.pause()
            await pilot.pause()
            assert app.query_one(TabbedContent).active == "tab-2"
            table = app.query_one("#rungs-table", DataTable)
            assert table.get_row_at(table.cursor_row)[1].plain.startswith("✗")

    asyncio.run(scenario())


def test_y_copies_the_selected_rungs_message(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app._select("compile_error")
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("y")
            await pilot.pause()
            assert "arange's range must be a power of 2" in app.clipboard

    asyncio.run(scenario())


def test_the_palette_lists_ktuis_commands_and_every_kernel(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "Go to softmax_triton" in titles and "Re-run kernel" in titles
            assert not [t for t in titles if t in ("Theme", "Quit", "Keys", "Screenshot")]  # none of Textual's own

    asyncio.run(scenario())


def test_g_and_shift_g_go_to_the_first_and_last_row_of_the_focused_table(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app._select("softmax_triton")
            await pilot.press("2")
            await pilot.pause()
            table = app.query_one("#rungs-table", DataTable)
            await pilot.press("G")
            assert table.cursor_row == table.row_count - 1
            await pilot.press("g")
            assert table.cursor_row == 0

    asyncio.run(scenario())


def test_a_row_whose_file_changed_shows_new_while_it_waits_or_runs(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            from ktui.tui.panes.kernel_list import KernelList

            klist = app.query_one(KernelList)
            view = app.state.kernels["add_triton"]
            old = view.version
            view.disk_hash = "another content"
            view.state = "running"
            assert klist._cells(view, 0.0)[2].plain == "new"
            view.disk_hash = view.content_hash  # a re-run of what is on disk keeps its number
            assert klist._cells(view, 0.0)[2].plain == f"v{old}"

    asyncio.run(scenario())


def test_the_history_list_names_the_gpu_of_each_version_once_several_gpus_ran_them():
    def points(gpus):
        return [VersionPoint(version=v, verdict="passed", speedup=None, roofline=None, tier="gpu", finished=float(v),
                             gpu=gpu) for v, gpu in enumerate(gpus, start=1)]

    text = _head(points(["0", "1", "1"]), []).plain
    assert "v1\u00a0✓\u00a0passed\u00a0gpu0" in text and "v3\u00a0✓\u00a0passed\u00a0gpu1" in text
    assert "gpu" not in _head(points(["0", "0"]), []).plain  # one GPU: nothing to tell apart
    assert "gpu" not in _head(points(["", ""]), []).plain  # runs from before GPUs were recorded


def test_kernels_running_on_two_gpus_at_once_are_both_shown_running_and_the_status_line_names_the_gpus():
    from pathlib import Path

    from ktui.protocol.notices import QueueChanged, RunnerReady
    from ktui.tui.state import RUNNING, DashboardState

    state = DashboardState(Path("/ws"))
    for name in ("a", "b", "c"):
        state.kernels[name] = KernelView(id=name, path=f"/ws/kernels/{name}.py", reference="")
    state.apply(QueueChanged(running="a", queued=("c",), also_running=("b",)))
    assert [state.kernels[k].state == RUNNING for k in ("a", "b", "c")] == [True, True, False]
    state.apply(RunnerReady(tier="gpu", device="NVIDIA H200", arch="sm_90a", gpus=("0", "1")))
    assert device_text(state.tier, state.device, state.arch, state.gpus) == "NVIDIA H200 ×2 (GPUs 0,1) · sm_90a"
    # a run on one of them names its own GPU; the runner's GPUs stay in the status line
    state.apply(RunStarted("r1", kernel="b", path="/ws/kernels/b.py", version=1, content_hash="h", reference="",
                           reference_hash="", tier="gpu", device="NVIDIA H200", arch="sm_90a", run_dir="/r1", gpu="1"))
    assert state.kernels["b"].run_id == "r1" and state.gpus == ("0", "1")
    assert device_text("cpu", "CPU (Triton interpreter)", "sm_90a", ("0", "1")) == \
        "CPU · Triton interpreter ×2 (GPUs 0,1) · sm_90a"


def _start(view, run_id: str = "live") -> RunStarted:
    return RunStarted(run_id, kernel=view.id, path=view.path, version=(view.version or 0) + 1, content_hash="c",
                      reference="", reference_hash="", tier="gpu", device="NVIDIA H200", arch="sm_90a", run_dir="/r")


def _state_cell(app: KtuiApp, kernel_id: str) -> str:
    """The kernel's row of the list as drawn now: its state cell, as wide as its column."""
    klist = app.query_one(KernelList)
    row = klist.get_row_index(kernel_id) + 1  # under the header
    width = next(iter(klist.columns.values())).width  # the state column comes first
    return klist.render_line(row).text[1:1 + width].rstrip()


def test_between_two_rungs_the_kernel_list_shows_the_last_one_finished_not_starting(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            view = app.state.kernels["softmax_triton"]
            app.post_message(WatchItem(_start(view)))
            await pilot.pause()
            assert _state_cell(app, "softmax_triton") == "▶ starting"
            for item in (RungFinished("live", rung="pre-checks", status="ok", figures={"tests": 6, "benchmarks": 3}),
                         RungStarted("live", rung="compile"),
                         RungFinished("live", rung="compile", status="ok"),
                         RungFinished("live", rung="correctness[rows=1]", status="ok")):
                app.post_message(WatchItem(item))
            await pilot.pause()
            assert _state_cell(app, "softmax_triton") == "▶ check 1/6 ✓"
            app.post_message(WatchItem(RungStarted("live", rung="correctness[rows=3]")))
            await pilot.pause()
            assert _state_cell(app, "softmax_triton") == "▶ check 2/6"

    asyncio.run(scenario())


@pytest.mark.parametrize("size, shown", [((200, 48), "▶ bench 1/3 · calibrating the GPU"),
                                         ((80, 24), "▶ bench 1/3 · calibratin…")])
def test_the_state_column_takes_the_room_the_list_has_and_a_cut_state_ends_with_an_ellipsis(tmp_path, size, shown):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            view = app.state.kernels["softmax_triton"]
            for item in (_start(view), RungFinished("live", rung="pre-checks", status="ok",
                                                    figures={"tests": 6, "benchmarks": 3}),
                         RungStarted("live", rung="benchmark[rows=4096]", note="calibrating the GPU: launch floor")):
                app.post_message(WatchItem(item))
            await pilot.pause()
            await pilot.pause()
            assert _state_cell(app, "softmax_triton") == shown
            app.post_message(WatchItem(RunFinished("live", verdict="passed")))
            await pilot.pause()
            await pilot.pause()
            assert _state_cell(app, "softmax_triton") == "✓ passed"
            assert next(iter(app.query_one(KernelList).columns.values())).width == 13  # back to its least

    asyncio.run(scenario())


def test_a_passing_rungs_long_note_is_cut_after_two_lines_with_an_ellipsis_and_enter_shows_it_whole(tmp_path):
    note = ("1 Triton kernel(s); 6 test shape(s), 3 benchmark shape(s); memory: needs ~0.739 GB per checked call "
            "(inputs 0.134 GB ×2, outputs 0.134 GB ×2, workspace 0.202 GB) at rows=8192,cols=8192,dtype=bfloat16, "
            "23.8 GB free on the host's RAM")

    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            view = app.state.kernels["softmax_triton"]
            for item in (_start(view), RungFinished("live", rung="pre-checks", status="ok", message=note),
                         RunFinished("live", verdict="failed")):
                app.post_message(WatchItem(item))
            await pilot.pause()
            app._select("softmax_triton")
            await pilot.press("2", "g")
            await pilot.pause()
            table = app.query_one("#rungs-table", DataTable)
            cell = table.get_row_at(0)[2].plain.splitlines()
            assert len(cell) == 2 and cell[1].endswith("…") and table.rows[next(iter(table.rows))].height == 2
            detail = app.query_one("#rung-detail")
            assert str(detail.render()) == "enter: show the whole note"
            await pilot.press("enter")
            await pilot.pause()
            assert str(detail.render()).replace("\n", " ") == note

    asyncio.run(scenario())
