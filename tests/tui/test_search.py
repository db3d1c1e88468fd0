"""``/`` search, ``n`` / ``N`` and the ``w`` wrap toggle in the dashboard's text panes, on the
recorded CPU runs (tests/fixtures/dashboard/cpu): the SASS diff of softmax_triton (v1 → v3) and
the compile error of compile_error."""

from __future__ import annotations

import asyncio

import pytest
from dashboard_fixture import replay_cpu_history
from textual.widgets import DataTable

from ktui.tui.actions import NOTHING_TO_SEARCH
from ktui.tui.app import KtuiApp
from ktui.tui.panes.compile_errors import CompilePane
from ktui.tui.panes.kernel_list import KernelList
from ktui.tui.panes.output import OutputPane
from ktui.tui.panes.rungs import RungsPane
from ktui.tui.panes.sass_diff import SassPane
from ktui.tui.search_bar import SearchBar
from ktui.tui.searchable import PaneText, TextPane
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.unit


def viewer(tmp_path):
    ws, now = replay_cpu_history(tmp_path / "ws")
    return KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)


def said(app: KtuiApp) -> list[str]:
    return [n.message for n in app._notifications]


def current(pane: TextPane) -> tuple[str, int]:
    """The text of the row holding the current match, and the match's number (from 0)."""
    found = pane._flat()
    k = pane._current(found)
    assert k is not None, "no current match"
    text, index = found[k]
    return text.rows()[text.matches[index].row].plain, k


def in_view(pane: TextPane) -> bool:
    region = pane.match_region()
    return region is not None and pane.scroll_y <= region.y < pane.scroll_y + pane.scrollable_content_region.height


async def open_sass(app: KtuiApp, pilot) -> SassPane:
    await pilot.pause()
    app._select("softmax_triton")
    await pilot.press("4")
    await app.workers.wait_for_complete()
    await pilot.pause(0.2)
    return app.query_one(SassPane)


async def search(pilot, query: str) -> None:
    await pilot.press("slash", *query, "enter")
    await pilot.pause()
    await pilot.pause()


def test_slash_marks_every_sass_match_and_scrolls_to_the_first(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            sass = await open_sass(app, pilot)
            lines = [row.plain for text in sass.query(PaneText) for row in text.rows()]
            expected = sum(line.lower().count("fmul") for line in lines)
            assert expected > 3  # the fixture: FMUL in the opcode deltas and the diff
            await search(pilot, "fmul")
            assert len(sass._flat()) == expected
            row, number = current(sass)
            assert number == 0 and "FMUL" in row and in_view(sass)
            assert f"match 1/{expected} for 'fmul' · n next, N previous" in said(app)
            assert app.focused is sass and not app.query_one(SearchBar).has_class("-open")
            # the current match is drawn marked, in the pane's own text
            text, index = sass._flat()[0]
            drawn = text.content.renderables[text.matches[index].row]
            marked = text.get_component_rich_style("pane-text--current")
            start, end = text.matches[index].start, text.matches[index].end
            assert any(span.start == start and span.end == end and span.style == marked for span in drawn.spans)

    asyncio.run(scenario())


def test_n_and_shift_n_step_through_the_matches_wrapping_at_the_ends(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            sass = await open_sass(app, pilot)
            await search(pilot, "FMUL")
            count = len(sass._flat())
            seen = [current(sass)[1]]
            for _ in range(count - 1):
                await pilot.press("n")
                await pilot.pause()
                seen.append(current(sass)[1])
                assert in_view(sass)  # the view follows the match down the diff
            assert seen == list(range(count)) and sass.scroll_y > 0
            assert not [m for m in said(app) if "wrapped" in m]
            await pilot.press("n")
            await pilot.pause()
            assert current(sass)[1] == 0 and in_view(sass)
            assert said(app)[-1] == f"search wrapped to the top: match 1/{count} for 'FMUL'"
            await pilot.press("N")
            await pilot.pause()
            assert current(sass)[1] == count - 1
            assert said(app)[-1] == f"search wrapped to the bottom: match {count}/{count} for 'FMUL'"
            await pilot.press("N")
            await pilot.pause()
            assert current(sass)[1] == count - 2

    asyncio.run(scenario())


def test_the_first_match_is_the_first_below_the_top_of_the_view(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            sass = await open_sass(app, pilot)
            await pilot.press("G")
            await pilot.pause()
            top = sass.scroll_y
            assert top > 0
            await search(pilot, "FMUL")
            assert current(sass)[1] > 0  # the matches above the view are skipped
            assert sass.match_region().y >= top

    asyncio.run(scenario())


def test_a_capital_letter_makes_the_search_case_sensitive(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            sass = await open_sass(app, pilot)
            await search(pilot, "fmul")
            lower = len(sass._flat())
            await search(pilot, "Fmul")
            assert lower > 0 and sass._flat() == []
            assert said(app)[-1] == "no match for 'Fmul'"

    asyncio.run(scenario())


def test_a_query_with_no_match_says_so_and_marks_nothing(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            sass = await open_sass(app, pilot)
            await search(pilot, "no such opcode")
            assert said(app)[-1] == "no match for 'no such opcode'"
            assert sass._flat() == [] and sass.match_region() is None
            await pilot.press("n")
            await pilot.pause()
            assert said(app)[-1] == "no match for 'no such opcode'"

    asyncio.run(scenario())


def test_keys_typed_into_the_search_are_text_and_escape_closes_it(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app._select("compile_error")
            await pilot.press("1")
            await pilot.pause()
            pane = app.query_one(CompilePane)
            bar = app.query_one(SearchBar)
            await pilot.press("slash", *"add_kernel")
            assert bar.has_class("-open") and bar.value == "add_kernel"
            assert app.diff_base == "previous"  # the d was typed, not the base cycled
            await pilot.press("escape")
            await pilot.pause()
            assert not bar.has_class("-open") and app.focused is pane and pane._flat() == []
            await search(pilot, "add_kernel")
            row, _ = current(pane)
            assert "def add_kernel(" in row

    asyncio.run(scenario())


def test_w_wraps_the_long_source_line_of_a_compile_error_and_cuts_it_again(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app._select("compile_error")
            await pilot.press("1")
            await pilot.pause()
            pane = app.query_one(CompilePane)
            body = pane.query_one("#compile-body", PaneText)
            long_rows = [r for r in body.rows() if r.cell_len > body.content_size.width]
            assert long_rows  # the tl.store line of the fixture is wider than the pane
            cut = body.size.height
            await pilot.press("w")
            await pilot.pause()
            assert pane.wrap and body.size.height > cut
            assert said(app)[-1] == "1 compile: long lines wrap"
            await pilot.press("w")
            await pilot.pause()
            assert not pane.wrap and body.size.height == cut

    asyncio.run(scenario())


def test_w_cuts_the_long_printed_lines_of_the_output_pane(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            pane = app.query_one(OutputPane)
            view = app.state.kernels["add_triton"]
            view.output = ["a printed line " * 20, "short"]
            view.state = "running"
            app._select("add_triton")
            await pilot.press("6")
            app._fill_panes()
            await pilot.pause()
            body = pane.query_one("#output-body", PaneText)
            wrapped = body.size.height
            assert pane.wrap and wrapped > 2
            await pilot.press("w")
            await pilot.pause()
            assert not pane.wrap and body.size.height == 2
            await search(pilot, "short")
            assert current(pane)[0] == "short" and body.size.height == 2  # a search keeps the pane's wrap

    asyncio.run(scenario())


def test_a_search_of_a_flood_of_output_marks_the_first_matches_only_and_says_there_are_more(tmp_path):
    from ktui.protocol.bounds import LINE_CHARS
    from ktui.tui.panes.output import SHOWN_CHARS
    from ktui.tui.searchable import SEARCH_MATCHES
    from ktui.tui.state import OUTPUT_KEPT

    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            pane = app.query_one(OutputPane)
            view = app.state.kernels["add_triton"]
            view.output = [f"{n} " + "x" * LINE_CHARS for n in range(OUTPUT_KEPT)]  # a flood, as a view keeps it
            view.state = "running"
            app._select("add_triton")
            await pilot.press("6")
            app._fill_panes()
            await pilot.pause()
            body = pane.query_one("#output-body", PaneText)
            shown = [row.plain for row in body.rows()]
            assert sum(len(row) + 1 for row in shown) <= SHOWN_CHARS and shown[-1].startswith(f"{OUTPUT_KEPT - 1} ")
            head = pane.query_one("#output-head", PaneText).rows()[0].plain
            assert head.endswith(f"{OUTPUT_KEPT} line(s) printed, the last {len(shown)} shown")
            await search(pilot, "x")
            assert len(pane._flat()) == SEARCH_MATCHES and body.more
            assert said(app)[-1].endswith(f"match 1/{SEARCH_MATCHES}+ for 'x' (the first {SEARCH_MATCHES} marked)")
            assert pane.border_subtitle == f"/x 1/{SEARCH_MATCHES}+"
            await pilot.press("N")
            await pilot.pause()
            assert current(pane)[1] == SEARCH_MATCHES - 1 and pane.border_subtitle == f"/x {SEARCH_MATCHES}/{SEARCH_MATCHES}+"

    asyncio.run(scenario())


def test_slash_in_the_rungs_pane_finds_rungs_and_what_is_typed_after_it_is_never_a_key(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            app._select("softmax_triton")
            await pilot.press("2")
            await pilot.pause()
            rungs = app.query_one(RungsPane)
            table = rungs.query_one(DataTable)
            keys_before = (app.diff_base, app.follow, app.options.strict, app.selected, dict(app.state.profiles))
            # d cycles the diff base, f follow, s strict, p profiles, r re-runs: typed here, they are text
            await pilot.press("slash", *"dfsprintegrity")
            bar = app.query_one(SearchBar)
            assert bar.has_class("-open") and bar.value == "dfsprintegrity"
            assert (app.diff_base, app.follow, app.options.strict, app.selected, dict(app.state.profiles)) == keys_before
            await pilot.press("escape")
            await search(pilot, "integrity")
            assert table.cursor_row == _row_of(table, "integrity") and app.focused is table
            assert said(app)[-1] == "match 1/1 for 'integrity' · n next, N previous"
            assert rungs.border_subtitle == "/integrity"
            await search(pilot, "rows=")
            first = table.cursor_row
            await pilot.press("n")
            await pilot.pause()
            assert table.cursor_row > first and "rows=" in _row_text(table, table.cursor_row)

    asyncio.run(scenario())


def test_slash_in_the_kernel_list_puts_the_cursor_on_the_kernel_named(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            app._select("add_cutedsl")
            app.query_one(KernelList).focus()
            await search(pilot, "softmax_t")
            await pilot.pause()
            assert app.selected == "softmax_triton"
            await search(pilot, "no such kernel")
            assert said(app)[-1] == "no match for 'no such kernel'" and app.selected == "softmax_triton"

    asyncio.run(scenario())


def test_slash_where_there_is_nothing_to_search_opens_the_input_all_the_same_and_says_where_search_works(tmp_path):
    async def scenario():
        app = viewer(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app._select("softmax_h200")
            await pilot.press("3")  # the history chart: nothing to search
            await pilot.pause()
            before = (app.diff_base, app.follow, app.options.strict, dict(app.state.profiles))
            await pilot.press("slash", *"dfsp", "enter")
            await pilot.pause()
            assert (app.diff_base, app.follow, app.options.strict, dict(app.state.profiles)) == before
            assert not app.query_one(SearchBar).has_class("-open")
            assert said(app)[-1] == NOTHING_TO_SEARCH
            await pilot.press("w")
            await pilot.pause()
            assert said(app)[-1] == "no text pane here: w wraps the long lines of 1 compile, 4 sass, 5 ncu, 6 output"

    asyncio.run(scenario())


def _row_text(table: DataTable, row: int) -> str:
    return " ".join(cell.plain for cell in table.get_row_at(row))


def _row_of(table: DataTable, word: str) -> int:
    return next(i for i in range(table.row_count) if _row_text(table, i).startswith(word))


def test_the_footer_at_160_columns_and_the_help_list_the_search_and_wrap_keys(tmp_path):
    from ktui.tui.key_bar import KeyBar

    line = KeyBar(KtuiApp.BINDINGS).line(158).plain
    assert "/ search" in line and "w wrap" in line
    keys = dict(viewer(tmp_path)._key_help())
    assert {"/", "n", "N", "w"} <= set(keys)
    assert "wraps around" in keys["n"] and "capital letter" in keys["/"]
