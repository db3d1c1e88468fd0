"""The user-visible docs stay short where they must, their links lead somewhere, and the README's
test command is the one CI runs."""

import re
from pathlib import Path

import pytest
from conftest import REPO
from doctext import anchors, link_targets

pytestmark = pytest.mark.unit

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


def test_the_readme_is_at_most_15_kb():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes: move detail into docs/ (limit {README_LIMIT})"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page):
    assert broken_links(page) == []


def test_a_broken_link_and_a_missing_anchor_are_both_caught(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## The `ktui audit`: a check\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#the-ktui-audit-a-check) [gone](nowhere.md) [lost](other.md#nope)\n"
                    "`[code](not-a-link.md)`\n\n```\n[fenced](not-a-link-either.md)\n```\n"
                    "[1 s][fast] [2 s][slow]\n\n[fast]: other.md#other\n[slow]: other.md#gone\n")
    assert [b.split(":")[0] for b in broken_links(page)] == ["nowhere.md", "other.md#nope", "other.md#gone"]


def test_the_readme_gives_the_two_commands_as_ci_runs_the_tests():
    ci = (REPO / ".ci" / "run").read_text()
    test_command = next(line.strip() for line in ci.splitlines() if "python3 -m pytest" in line)
    text = README.read_text()
    assert test_command in text, f".ci/run runs {test_command!r}; the README must give it verbatim"
    assert RUN_COMMAND in text
