"""docs/measured.md is today's figures, one table each, and a figure the docs give is quoted from
its table, so the two cannot drift.

A row is ``| key | value | … | machine | date | commit | measured by |``; a doc quotes it as the
reference link ``[value][key]`` with ``[key]: …measured.md#<its section>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO
from doctext import DEFINITION, REFERENCE, prose, sections, tables

pytestmark = pytest.mark.unit

MEASURED = REPO / "docs" / "measured.md"
README = REPO / "README.md"
PAGES = [README, REPO / "CONTRIBUTING.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
LIMIT = 25_000  # bytes: today's figures, read in one sitting; the story of each sitting is in the log
FIRST, LAST = ["key", "value"], ["machine", "date", "commit", "measured by"]
NOT_RECORDED = "not recorded"
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
COMMIT = re.compile(r"\bcommit ([0-9a-f]{7,40})\b")
# What the README may not give in its own words: a time, a size, a share or a count of tests.
FIGURE = re.compile(r"\b\d[\d,.]*(?:[–-]\d[\d,.]*)?\s?(?:ms|µs|s|min|h|seconds?|minutes?|hours?|[KMG]i?B|GB/s"
                    r"|TFLOP/s|%|tests|passed|failed)(?!\w)")
# The figures a newcomer reads first: the README must keep quoting them from their tables.
README_KEYS = {"first-run", "suite-wall", "suite-pytest", "suite-count", "unit-tier", "save-verdict-cpu",
               "save-verdict-h200-spaced-1", "save-verdict-h200-spaced-2"}


@dataclass(frozen=True)
class Row:
    key: str
    value: str
    section: str  # the anchor of its ``##`` heading
    date: str
    commit: str


def layout_problems(text: str) -> list[str]:
    """What keeps a page from being one table per figure, each row with its provenance."""
    problems, keys = [], set()
    for section, body in sections(text):
        found = tables(body)
        if len(found) != 1:
            problems.append(f"#{section}: {len(found)} tables, where one is wanted")
            continue
        header, rows = found[0]
        if header[:2] != FIRST or header[-4:] != LAST:
            problems.append(f"#{section}: the columns are {header}, not {FIRST} … {LAST}")
            continue
        for row in rows:
            key, date, commit = row[0].strip("`"), row[-3], row[-2]
            if key in keys:
                problems.append(f"#{section}: the key {key} is used twice")
            keys.add(key)
            if len(row) != len(header) or not row[1] or not row[-4] or not row[-1]:
                problems.append(f"#{section}: {key} lacks a cell")
            if date != NOT_RECORDED and not re.fullmatch(DATE.pattern, date):
                problems.append(f"#{section}: {key}'s date {date!r} is neither YYYY-MM-DD nor {NOT_RECORDED!r}")
            if commit != NOT_RECORDED and not re.fullmatch(r"[0-9a-f]{7,40}", commit):
                problems.append(f"#{section}: {key}'s commit {commit!r} is neither a hash nor {NOT_RECORDED!r}")
    return problems


def figures(text: str) -> dict[str, Row]:
    """Every row of the page's tables, by key."""
    return {row[0].strip("`"): Row(row[0].strip("`"), row[1], section, row[-3], row[-2])
            for section, body in sections(text) for _, rows in tables(body) for row in rows}


def quotes(page: Path, measured: Path) -> list[tuple[str, str, str]]:
    """(the text, the key, the anchor) of each reference link on the page that leads into measured."""
    text = prose(page.read_text())
    targets = {}
    for label, target in DEFINITION.findall(text):
        path, _, anchor = target.partition("#")
        if path and (page.parent / path).resolve() == measured.resolve():
            targets[label] = anchor
    return [(shown, key, targets[key]) for shown, key in REFERENCE.findall(text) if key in targets]


def quote_problems(page: Path, measured: Path) -> list[str]:
    rows = figures(measured.read_text())
    problems = []
    for shown, key, anchor in quotes(page, measured):
        row = rows.get(key)
        if row is None:
            problems.append(f"[{shown}][{key}]: {measured.name} has no row {key}")
        elif shown != row.value:
            problems.append(f"[{shown}][{key}]: the table says {row.value!r}")
        elif anchor != row.section:
            problems.append(f"[{shown}][{key}]: the row is under #{row.section}, the link leads to #{anchor}")
    return problems


def unled_figures(page: Path, measured: Path) -> list[str]:
    """Reference links that lead nowhere, and figures shown as a reference link that does not lead into
    measured: both would pass for a quote, and neither is checked against a row."""
    text = prose(page.read_text())
    defined = {label for label, _ in DEFINITION.findall(text)}
    into = {key for _, key, _ in quotes(page, measured)}
    problems = []
    for shown, key in REFERENCE.findall(text):
        if key not in defined:
            problems.append(f"[{shown}][{key}]: no definition [{key}]: …")
        elif FIGURE.search(shown) and key not in into:
            problems.append(f"[{shown}][{key}]: a figure, and [{key}] does not lead into {measured.name}")
    return problems


def unquoted_figures(page: Path) -> list[str]:
    """Figures in the page's prose that are not quoted from a table."""
    text = REFERENCE.sub("quoted", DEFINITION.sub("", prose(page.read_text())))
    return [match.group(0) for match in FIGURE.finditer(text)]


def provenance_problems(page: Path, measured: Path) -> list[str]:
    """A date or commit named beside quoted figures must be one of theirs."""
    rows = figures(measured.read_text())
    problems = []
    for paragraph in re.split(r"\n\s*\n", prose(page.read_text())):
        quoted = [rows[key] for _, key in REFERENCE.findall(paragraph) if key in rows]
        if not quoted:
            continue
        for date in DATE.findall(paragraph):
            if date not in {row.date for row in quoted}:
                problems.append(f"{date} is the date of none of {[row.key for row in quoted]}")
        for commit in COMMIT.findall(paragraph):
            if commit not in {row.commit for row in quoted}:
                problems.append(f"commit {commit} measured none of {[row.key for row in quoted]}")
    return problems


def test_measured_md_is_at_most_25_kb():
    size = len(MEASURED.read_bytes())
    assert size <= LIMIT, f"docs/measured.md is {size} bytes: a sitting's notes go to docs/measured/log/"


def test_each_section_of_measured_md_is_one_table_whose_rows_name_machine_date_commit_and_script():
    assert figures(MEASURED.read_text()), "no figures read"
    assert layout_problems(MEASURED.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_figure_a_doc_quotes_is_its_rows_value(page):
    assert quote_problems(page, MEASURED) == []
    assert provenance_problems(page, MEASURED) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_reference_link_is_defined_and_every_figure_shown_as_one_leads_to_its_row(page):
    assert unled_figures(page, MEASURED) == []


def test_a_figure_as_a_link_to_nowhere_or_to_another_page_is_caught(tmp_path):
    measured = tmp_path / "measured.md"
    measured.write_text("## First run\n\n| key | value | what | machine | date | commit | measured by |\n"
                        "| --- | --- | --- | --- | --- | --- | --- |\n"
                        "| `first-run` | 1 min 44 s | exit 0 | 2-core CPU | 2026-12-03 | fa99983 | the command |\n")
    page = tmp_path / "README.md"
    page.write_text("[1 min 44 s][first-run], [15 min][nowhere], [16 MiB][agents] and [the agents][agents].\n\n"
                    "[first-run]: measured.md#first-run\n[agents]: agents.md\n")
    assert unquoted_figures(page) == []  # what this test is for: each hides a figure from that check
    assert unled_figures(page, measured) == ["[15 min][nowhere]: no definition [nowhere]: …",
                                             "[16 MiB][agents]: a figure, and [agents] does not lead into measured.md"]


def test_the_readme_gives_no_figure_of_its_own_and_quotes_the_newcomers_figures():
    assert unquoted_figures(README) == []
    assert {key for _, key, _ in quotes(README, MEASURED)} >= README_KEYS


def test_a_drifted_figure_a_wrong_section_or_date_and_an_unquoted_figure_are_caught(tmp_path):
    measured = tmp_path / "measured.md"
    measured.write_text("# Measured\n\n## First run\n\n| key | value | what | machine | date | commit | measured by |\n"
                        "| --- | --- | --- | --- | --- | --- | --- |\n"
                        "| `first-run` | 1 min 44 s | exit 0 | 2-core CPU | 2026-12-03 | fa99983 | the command |\n\n"
                        "## Save → verdict\n\n| key | value | what | machine | date | commit | measured by |\n"
                        "| --- | --- | --- | --- | --- | --- | --- |\n"
                        "| `save-verdict-cpu` | 1.114 s | p50 | 2-core CPU | 2026-12-02 | e532c00 | a script |\n")
    page = tmp_path / "README.md"
    page.write_text("It took [1 min 44 s][first-run] (2026-12-03, commit fa99983).\n\n"
                    "Then [1.1 s][save-verdict-cpu] and [1.114 s][cpu-moved] (2026-12-01, commit e532c00).\n\n"
                    "The suite took 15 min 0 s, 1,123 tests; `12 s` in code is no figure.\n\n"
                    "[first-run]: measured.md#first-run\n[save-verdict-cpu]: measured.md#save--verdict\n"
                    "[cpu-moved]: measured.md#first-run\n")
    assert layout_problems(measured.read_text()) == []
    assert quote_problems(page, measured) == ["[1.1 s][save-verdict-cpu]: the table says '1.114 s'",
                                              "[1.114 s][cpu-moved]: measured.md has no row cpu-moved"]
    assert provenance_problems(page, measured) == ["2026-12-01 is the date of none of ['save-verdict-cpu']"]
    assert unquoted_figures(page) == ["15 min", "0 s", "1,123 tests"]
    page.write_text("[1.114 s][save-verdict-cpu]\n\n[save-verdict-cpu]: measured.md#first-run\n")
    assert quote_problems(page, measured) == [
        "[1.114 s][save-verdict-cpu]: the row is under #save--verdict, the link leads to #first-run"]


def test_a_section_of_two_tables_a_table_without_provenance_and_a_bad_row_are_caught():
    head = "| key | value | what | machine | date | commit | measured by |\n| --- | --- | --- | --- | --- | --- | --- |\n"
    text = ("## One\n\n| key | value | machine |\n| --- | --- | --- |\n| `a` | 1 s | H200 |\n\n"
            "## Two\n\n" + head + "| `b` | 1 s | x | H200 | 2026-12-03 | fa99983 | a script |\n\n" + head +
            "| `c` | 2 s | x | H200 | 2026-12-03 | fa99983 | a script |\n\n"
            "## Three\n\n" + head + "| `d` | 2 s | x | H200 | 2026-12-03 | not recorded | a script |\n\n"
            "## Four\n\n" + head + "| `d` | 3 s | x | H200 | yesterday | HEAD | a script |\n"
            "| `e` |  | x | H200 | 2026-12-03 | fa99983 |  |\n")
    assert layout_problems(text) == [
        "#one: the columns are ['key', 'value', 'machine'], not ['key', 'value'] … "
        "['machine', 'date', 'commit', 'measured by']",
        "#two: 2 tables, where one is wanted",
        "#four: the key d is used twice",
        "#four: d's date 'yesterday' is neither YYYY-MM-DD nor 'not recorded'",
        "#four: d's commit 'HEAD' is neither a hash nor 'not recorded'",
        "#four: e lacks a cell"]
