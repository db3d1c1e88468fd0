"""The user-visible docs stay short where they must, their links lead somewhere, the README's
test command is the one CI runs, and every sample of the program's output they show is what it
prints (tests/doc_samples.py makes them).

The tests of this file are ``unit`` but one, marked ``worker``: the samples against a fresh run.
"""

import re
from pathlib import Path

import doc_samples
import pytest
from conftest import REPO
from doctext import anchors, link_targets

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
