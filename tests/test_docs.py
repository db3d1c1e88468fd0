"""The user-visible docs stay short where they must, their links lead somewhere, the README's
test command is the one CI runs, and what they show of the program is the program's: every sample
of its output (tests/doc_samples.py makes them), every exit code, every bound and size they quote.

The tests of this file are ``unit`` but one, marked ``worker``: the samples against a fresh run.
"""

import ast
import re
import signal
from pathlib import Path

import doc_samples
import pytest
from conftest import REPO
from doctext import anchors, link_targets, tables

from ktui.cli import exits

README = REPO / "README.md"
PAGES = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
README_LIMIT = 15_000  # bytes: a new user reads it in one sitting
RUN_COMMAND = "python3 -m pip install -e '.[cpu,mcp]' && ktui run kernels/"


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in link_targets(page.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto: — not ours to check
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading in {file.name} has the anchor #{anchor}")
    return broken


@pytest.mark.unit
def test_the_readme_is_at_most_15_kb():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes: move detail into docs/ (limit {README_LIMIT})"


@pytest.mark.unit
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page):
    assert broken_links(page) == []


@pytest.mark.unit
def test_a_broken_link_and_a_missing_anchor_are_both_caught(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## The `ktui audit`: a check\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#the-ktui-audit-a-check) [gone](nowhere.md) [lost](other.md#nope)\n"
                    "`[code](not-a-link.md)`\n\n```\n[fenced](not-a-link-either.md)\n```\n"
                    "[1 s][fast] [2 s][slow]\n\n[fast]: other.md#other\n[slow]: other.md#gone\n")
    assert [b.split(":")[0] for b in broken_links(page)] == ["nowhere.md", "other.md#nope", "other.md#gone"]


@pytest.mark.unit
def test_the_readme_gives_the_two_commands_as_ci_runs_the_tests():
    ci = (REPO / ".ci" / "run").read_text()
    test_command = next(line.strip() for line in ci.splitlines() if "python3 -m pytest" in line)
    text = README.read_text()
    assert test_command in text, f".ci/run runs {test_command!r}; the README must give it verbatim"
    assert RUN_COMMAND in text


# -- samples of ktui's output (tests/doc_samples.py makes them) ----------------------------------
# A line of ktui's output in a fenced block: a command, a kernel's header, a rung, a summary, a tool call.
OUTPUT_LINE = re.compile(r"^(?:\$ ktui |== \S+ v\d+ |\[[\w-]+(?:\[[^\]]*\])?(?: ×\d+)?\] (?:ok|failed|skipped)\b"
                         r"|→ \w+ \{|\S+ v\d+ (?:passed|compiled|failed|suspicious|crashed|timed_out|error|cancelled"
                         r"|interrupted) · )", re.M)
# The pages that show ktui as it is today (docs/measured/log/ records past sittings as they printed then).
SHOWING = [page for page in PAGES if page.parent.name != "log"]


def unmarked_output(text: str) -> list[str]:
    """The first line of each fenced block that shows ktui's output but is no marked sample."""
    found = []
    for match in re.finditer(r"(?P<before>[^\n]*)\n```[^\n]*\n(?P<body>.*?)^```$", text, re.M | re.S):
        if doc_samples.OPENED.fullmatch(match["before"]):
            continue
        line = OUTPUT_LINE.search(match["body"])
        if line:
            found.append(match["body"][line.start():].split("\n", 1)[0])
    return found


@pytest.mark.unit
@pytest.mark.parametrize("page", SHOWING, ids=lambda p: str(p.relative_to(REPO)))
def test_every_sample_of_ktuis_output_in_a_page_is_marked_and_made_by_the_script(page):
    name = str(page.relative_to(REPO))
    marked = doc_samples.samples_in(page.read_text())
    assert {n: doc_samples.SAMPLES.get(n) for n in marked} == {n: name for n in marked}
    assert unmarked_output(page.read_text()) == [], "mark it and make it in tests/doc_samples.py"


@pytest.mark.unit
def test_every_sample_the_script_makes_is_in_its_page():
    assert set(doc_samples.documented()) == set(doc_samples.SAMPLES)


@pytest.mark.unit
def test_output_outside_a_marked_sample_is_found_and_a_command_or_a_config_is_not():
    text = ("Run it:\n```\n$ ktui run kernels/\n```\n\n<!-- sample: x -->\n```\n== add_triton v1 (…)\n```\n"
            "<!-- /sample -->\n\n```bash\nktui run kernels/  # a command\n```\n\n```json\n{\"mcpServers\": {}}\n```\n"
            "Then:\n```\n[compile] ok compile_s=1.2\n```\n\nAnd:\n```\nadd_triton v2 failed · run: KeyError\n```\n")
    assert unmarked_output(text) == ["$ ktui run kernels/", "[compile] ok compile_s=1.2",
                                     "add_triton v2 failed · run: KeyError"]


@pytest.mark.unit
def test_the_h200_sample_is_what_the_cli_printer_makes_of_the_recorded_run():
    assert doc_samples.recorded_samples() == {"h200-run": doc_samples.documented()["h200-run"]}


@pytest.mark.unit
def test_what_varies_from_run_to_run_becomes_its_placeholder_and_nothing_else_changes(tmp_path):
    ws = tmp_path / "ws"
    printed = (f"== add v1 ({ws}/kernels/add.py) · cpu · CPU (Triton interpreter) · sm_90a · landlock ABI 5: writes; "
               "not held: signals (Landlock ABI 6)\n"
               "[pre-checks] ok memory: needs ~1.8 GB at size=1, 20.3 GB free on the host's RAM within its cgroup's "
               "2.0 GB limit\n[compile] ok compile_s=1.44 reused=2\n[run] ok wall_s=0.07 max_abs=0.5\n"
               "add v1 passed · 5/5 correct · cpu sm_90a · not confined: no Landlock · 13.6 s\n"
               "audit: strong · references/add.py (fast checks, 19.8 s)\n"
               '{"duration_s": 11.64, "seconds_left": 3}\n')
    assert doc_samples.normalise(printed, ws) == (
        "== add v1 (<ws>/kernels/add.py) · cpu · CPU (Triton interpreter) · sm_90a\n"
        "[pre-checks] ok memory: needs ~1.8 GB at size=1, <free> GB free on the host's RAM\n"
        "[compile] ok compile_s=<t> reused=2\n[run] ok wall_s=<t> max_abs=0.5\n"
        "add v1 passed · 5/5 correct · cpu sm_90a · <t> s\n"
        "audit: strong · references/add.py (fast checks, <t> s)\n"
        '{"duration_s":<t>, "seconds_left": 3}\n')


@pytest.mark.unit
def test_a_sample_is_rewritten_between_its_markers_only_and_a_drifted_one_is_shown_as_its_diff():
    page = ("Before.\n<!-- sample: first-run -->\n```\nold line\nsame line\n```\n<!-- /sample -->\n"
            "<!-- sample: cpu-run -->\n```\nuntouched\n```\n<!-- /sample -->\nAfter.\n")
    assert doc_samples.samples_in(page) == {"first-run": "old line\nsame line\n", "cpu-run": "untouched\n"}
    written = doc_samples.with_sample(page, "first-run", "new line\nsame line\n")
    assert written == page.replace("old line", "new line")
    problems = doc_samples.differences({"first-run": "new line\nsame line\n", "cpu-run": "untouched\n"},
                                       doc_samples.samples_in(page))
    assert len(problems) == 1 and "-old line\n+new line" in problems[0]
    with pytest.raises(ValueError, match="no fenced block closed"):
        doc_samples.samples_in("<!-- sample: cpu-run -->\n```\nno end marker\n```\n")


@pytest.fixture(scope="module")
def cli_samples(tmp_path_factory):
    """first-run and cpu-run, from one ``ktui run kernels/ --seed 1 --cpu`` in a fresh workspace."""
    return doc_samples.made(list(doc_samples.CLI), tmp_path_factory.mktemp("doc-samples-cli"))


@pytest.fixture(scope="module")
def mcp_samples(tmp_path_factory):
    """mcp-session and mcp-tools, from one ``ktui mcp . --cpu`` session in a fresh workspace."""
    return doc_samples.made(list(doc_samples.MCP), tmp_path_factory.mktemp("doc-samples-mcp"))


# Twelve kernels and four audits on the CPU tier, TileLang's nvcc with a cold build cache: minutes on a
# loaded 2-core machine. The limit is a safety net.
@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", [*doc_samples.CLI, *doc_samples.MCP])
def test_each_sample_in_the_docs_is_what_a_fresh_run_prints(name, request):
    if name == "mcp-tools" and doc_samples.machine_note():
        pytest.skip(doc_samples.machine_note())
    fresh = request.getfixturevalue("cli_samples" if name in doc_samples.CLI else "mcp_samples")
    problems = doc_samples.differences({name: fresh[name]}, doc_samples.documented())
    assert problems == [], "\n".join(problems) + "\n\n(python3 tests/doc_samples.py writes them again)"


# -- exit codes: ktui/cli/exits.py ----------------------------------------------------------------
# What each exit status of ktui/cli/exits.py means, in the words a doc gives it: a new code fails here
# until a doc says it.
MEANING = {"EXIT_OK": "passed", "EXIT_FAILED": "failed", "EXIT_CANNOT_RUN": "could not run",
           "EXIT_SUSPICIOUS": "suspicious", "EXIT_UNTRUSTED": "trusted"}


def verdict_table_problems(page: Path) -> list[str]:
    """A page's verdict table (``| verdict | means | exit |``) against ktui's verdicts and their exit codes."""
    from ktui.protocol.schema import VERDICTS

    found = [rows for header, rows in tables(page.read_text()) if header == ["verdict", "means", "exit"]]
    if len(found) != 1:
        return [f"{len(found)} verdict tables, where one is wanted"]
    problems = []
    documented = [row[0].strip("`") for row in found[0]]
    if sorted(documented) != sorted(VERDICTS):
        problems.append(f"the table's verdicts {documented} are not ktui's {list(VERDICTS)}")
    for row in found[0]:
        verdict, cell = row[0].strip("`"), row[2]
        shown = int(re.match(r"\d+", cell).group(0))
        if shown != exits.exit_code([verdict]):
            problems.append(f"{verdict}: exit {shown}, where ktui exits {exits.exit_code([verdict])}")
        if verdict == "cancelled":
            stopped = f"{exits.exit_stopped(0)} + the signal, {exits.exit_stopped(signal.SIGINT)} for Ctrl-C"
            if stopped not in cell:
                problems.append(f"cancelled: {cell!r} does not say {stopped!r}")
    return problems


@pytest.mark.unit
@pytest.mark.parametrize("page", ["README.md", "docs/verdicts.md"])
def test_each_verdict_tables_exit_code_is_the_one_ktui_exits_with(page):
    assert verdict_table_problems(REPO / page) == []


@pytest.mark.unit
def test_a_wrong_exit_code_or_a_missing_verdict_in_a_verdict_table_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("| verdict | means | exit |\n| --- | --- | --- |\n| `passed` | ok | 0 |\n| `failed` | no | 2 |\n"
                    "| `cancelled` | stopped | 1 (128 + the signal, 131 for Ctrl-C) |\n")
    problems = verdict_table_problems(page)
    assert problems[0].startswith("the table's verdicts ['passed', 'failed', 'cancelled'] are not ktui's")
    assert problems[1:] == ["failed: exit 2, where ktui exits 1",
                            "cancelled: '1 (128 + the signal, 131 for Ctrl-C)' does not say "
                            "'128 + the signal, 130 for Ctrl-C'"]


def cli_exit_codes(text: str) -> dict[int, str]:
    """docs/cli.md's line of exit codes: ``Exit codes: `0` every rung … · `1` … · …`` as code → meaning."""
    flat = " ".join(text.split())
    line = re.search(r"Exit codes: (.*?)\. A ", flat)
    assert line, "docs/cli.md has no line 'Exit codes: …'"
    return {int(m[1]): m[2] for m in re.finditer(r"`(\d+)` (.*?)(?= · `\d+`|$)", line.group(1))}


@pytest.mark.unit
def test_the_clis_exit_codes_are_those_of_exits_py_each_with_its_meaning():
    documented = cli_exit_codes((REPO / "docs" / "cli.md").read_text())
    defined = {name: value for name, value in vars(exits).items() if name.startswith("EXIT_")}
    assert set(MEANING) == set(defined), "a new exit code: give it a meaning here and in docs/cli.md"
    interrupted = exits.exit_stopped(signal.SIGINT)
    assert set(documented) == set(defined.values()) | {interrupted}
    for name, value in defined.items():
        assert MEANING[name] in documented[value], f"`{value}` ({name}): {documented[value]!r}"
    assert documented[interrupted] == (f"stopped by Ctrl-C ({exits.exit_stopped(0)} + the signal: "
                                       f"`{exits.exit_stopped(signal.SIGTERM)}` for SIGTERM)")


@pytest.mark.unit
def test_the_audits_exit_codes_are_those_it_exits_with():
    from ktui.cli import audit

    flat = " ".join((REPO / "docs" / "verdicts.md").read_text().split())
    said = (f"exit `{exits.EXIT_OK}` strong, `{audit.EXIT_WEAK}` weak, `{exits.EXIT_CANNOT_RUN}` could not run")
    assert said in flat


# -- sizes and bounds the docs quote, against the constants they come from --------------------------
def constant(module: str, name: str):
    """A module-level constant of ktui, read from its source (a worker module imports torch)."""
    tree = ast.parse((REPO / (module.replace(".", "/") + ".py")).read_text())
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{module} defines no constant {name}")


def bounds_table() -> dict[str, list[str]]:
    """docs/verdicts.md's table of bounds, by the first words of its ``what`` cell."""
    (rows,) = [rows for header, rows in tables((REPO / "docs" / "verdicts.md").read_text())
               if header == ["what", "the most kept or drawn", "past it"]]
    return {row[0]: row[1:] for row in rows}


@pytest.mark.unit
def test_the_bounds_table_gives_each_bound_as_the_code_sets_it():
    from ktui.protocol import bounds
    from ktui.protocol.rungs import RUNGS
    from ktui.tui.panes.output import SHOWN_CHARS, SHOWN_LINES
    from ktui.tui.searchable import SEARCH_MATCHES

    sized = constant("ktui.worker.memory", "SIZED_SHAPES")
    pre_checks = next(r.timeout_s for r in RUNGS if r.name == "pre-checks")
    expected = {
        "a line a kernel prints": (f"{bounds.LINE_CHARS:,} characters", ""),
        "what a run prints, in `output.txt`": (f"{constant('ktui.history.reports', 'OUTPUT_LINES'):,} lines and "
                                               f"{constant('ktui.history.reports', 'OUTPUT_CHARS'):,} characters", ""),
        "a rung's or a run's message": (f"{bounds.MESSAGE_CHARS:,} characters, each line at most "
                                        f"{bounds.MESSAGE_LINE_CHARS:,}", ""),
        "a printed line a crash quotes": (f"{bounds.QUOTE_CHARS:,} characters", ""),
        "an error's traceback": (f"{bounds.TRACEBACK_CHARS:,} characters, each line at most "
                                 f"{bounds.MESSAGE_LINE_CHARS:,}", ""),
        "the dashboard's output pane": (f"the newest {SHOWN_LINES:,} lines, at most {SHOWN_CHARS:,} characters", ""),
        "the matches a search marks": (f"{SEARCH_MATCHES:,}", f"`{SEARCH_MATCHES}+`"),
        "the shapes the pre-checks size": (f"{sized} distinct shapes (a reference with 5,000 `TESTS` passes the "
                                           f"pre-checks within their {pre_checks:g} s)", f"a sample of {sized},"),
    }
    table = bounds_table()
    assert len(table) == len(expected), f"a row without its constant here, or one gone: {list(table)}"
    for start, (most, past) in expected.items():
        (what,) = [w for w in table if w.startswith(start)]
        assert table[what][0] == most, what
        assert past in table[what][1], what
    flat = " ".join((REPO / "docs" / "verdicts.md").read_text().split())
    assert f"Past {sized} distinct shapes (TESTS and BENCHMARKS), a sample of {sized} is sized" in flat


@pytest.mark.unit
def test_the_error_maps_sizes_are_the_codes():
    from ktui.protocol import errormap

    flat = " ".join((REPO / "docs" / "verdicts.md").read_text().split())
    assert errormap.MAX_JSON_BYTES == 2048
    assert (f"The grid is at most {errormap.MAX_ROWS} rows and {errormap.MAX_COLS} columns of cells, "
            f"{errormap.MAX_CELLS:,} cells in all (2 KB of JSON)") in flat
    words = {3: "three", 4: "four"}
    few, steps = constant("ktui.worker.errorpatterns", "FEW"), constant("ktui.worker.errormap", "MAP_STEPS")
    assert f"| `few` | {words[few]} elements or fewer |" in flat
    assert f"beyond {words[steps]} of its rounding steps" in flat


@pytest.mark.unit
def test_the_cli_docs_idle_limits_helpers_and_build_cache_are_the_codes():
    from ktui.protocol.processes import MAX_COMPILE_AHEAD
    from ktui.watch.service import IdleLimits

    flat = " ".join((REPO / "docs" / "cli.md").read_text().split())
    limits = IdleLimits()
    assert (f"its worker (and the GPU memory with it) after {limits.worker_s / 60:g} minutes, itself after "
            f"{limits.daemon_s / 60:g} (") in flat
    assert f"the worker's compile-ahead helpers end after {limits.helpers_s / 60:g} minutes" in flat
    assert constant("ktui.worker.main", "HELPERS_IDLE_S") == limits.helpers_s
    assert f"`KTUI_COMPILE_AHEAD=N` (0 to {MAX_COMPILE_AHEAD}," in flat
    assert f"It holds the {constant('ktui.worker.dsl.buildcache', 'MAX_ENTRIES')} entries used last." in flat


@pytest.mark.unit
def test_the_mcp_tools_bounds_are_the_servers():
    from ktui.agents.dumps import DEFAULT_PAGE_CHARS

    flat = " ".join((REPO / "docs" / "agents.md").read_text().split())
    assert f"`max_chars` (default {DEFAULT_PAGE_CHARS})" in flat


@pytest.mark.unit
def test_the_context_init_adds_is_the_size_the_docs_give(tmp_path):
    """``ktui init``'s context/, added as init adds it (``add_source``), at the versions the ``cpu``
    extra pins: the size docs/agents.md gives."""
    from ktui.agentdocs.sources import add_source, installed_offline_sources, offline_sources
    from ktui.protocol.dsls import dsls

    pins = dict(re.findall(r'"([\w-]+)==([\w.]+)"', (REPO / "pyproject.toml").read_text()))
    wanted = {dsl.name: pins.get(dsl.distribution) for dsl in dsls() if dsl.name in offline_sources()}
    if set(installed_offline_sources()) != set(wanted):
        pytest.skip(f"the docs give the size with every DSL installed; here only {installed_offline_sources()}")
    added = [add_source(name, tmp_path / "context") for name in wanted]
    versions = {a.source: a.version for a in added}
    if versions != wanted:
        pytest.skip(f"the docs give the size at the pinned versions {wanted}; installed here: {versions}")
    size = f"{sum(a.bytes for a in added) / 2**20:.1f} MiB"
    flat = " ".join((REPO / "docs" / "agents.md").read_text().split())
    assert f"`ktui context add {'|'.join(wanted)}` would ({size} with the versions the `cpu` extra pins" in flat
