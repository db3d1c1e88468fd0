"""``ktui init``: a workspace a coding agent can use from AGENTS.md alone.

It lays out kernels/, references/ (with the worked ``add`` example), context/, a .gitignore that
keeps ``.ktui/`` out of git, AGENTS.md (+ CLAUDE.md pointing to it), the MCP client configuration
for ``ktui mcp`` (Claude Code's ``.mcp.json``, Codex's ``.codex/config.toml``, Cursor's
``.cursor/mcp.json``) and the loop an agent follows, written once (``templates/loop.md``) for each:
Claude Code's skill, Cursor's rule, AGENTS.md (which Codex reads). It never overwrites a
file unless asked: without ``force`` it lists what is already there and writes nothing.

``.mcp.json`` is the file a team commits (Claude Code reads it from the repository), so it names
``ktui`` and stays portable; ``ktui init`` says what to do where ``ktui`` is not on PATH. The
Codex and Cursor files name the interpreter that ran init (``python -m ktui mcp``), so they start
the server from that environment even when its ``bin/`` is not on PATH.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

# workspace path → template name in ktui/workspace/templates/
FILES: dict[str, str] = {
    "AGENTS.md": "AGENTS.md",
    "CLAUDE.md": "CLAUDE.md",
    "references/add.py": "reference_add.py",
    "kernels/add_triton.py": "kernel_add_triton.py",
    "context/README.md": "context_README.md",
    ".mcp.json": "mcp.json",
    ".codex/config.toml": "codex_config.toml",
    ".cursor/mcp.json": "cursor_mcp.json",
    ".claude/skills/ktui-loop/SKILL.md": "skill_ktui_loop.md",
    ".cursor/rules/ktui-loop.mdc": "cursor_rule.mdc",
}
INTERPRETER = "@PYTHON@"  # in a template: the interpreter that ran init, as a JSON/TOML string
LOOP = "@LOOP@"  # in a template: the loop every agent follows (``loop.md``), written once for all of them
LOOP_TEMPLATE = "loop.md"
GITIGNORE = ".gitignore"
IGNORE_LINE = ".ktui/"


@dataclass
class InitResult:
    root: Path
    written: list[str] = field(default_factory=list)
    gitignore: str = ""  # "created" | "appended" | "already ignores .ktui/"
    conflicts: list[str] = field(default_factory=list)  # existing files left alone (nothing was written)


def template(name: str) -> str:
    return resources.files("ktui.workspace").joinpath("templates", name).read_text(encoding="utf-8")


def rendered(name: str, python: str = sys.executable) -> str:
    """A template as init writes it: the loop put in, the interpreter named."""
    return template(name).replace(LOOP, loop_text().rstrip("\n")).replace(INTERPRETER, json.dumps(python))


def loop_text() -> str:
    """The loop an agent follows, with its stop rule: Claude Code's skill, Cursor's rule, AGENTS.md
    (Codex's) and the MCP server's ``satisfy`` prompt all say it in these words."""
    return template(LOOP_TEMPLATE)


def init_workspace(root: Path, force: bool = False, python: str = sys.executable) -> InitResult:
    root = root.resolve()
    result = InitResult(root)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"{root} exists and is not a folder")
    existing = [rel for rel in FILES if (root / rel).exists()]
    if existing and not force:
        result.conflicts = existing
        return result
    for rel, name in FILES.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rendered(name, python), encoding="utf-8")
        result.written.append(rel)
    result.gitignore = _ignore_state(root / GITIGNORE)
    return result


def _ignore_state(path: Path) -> str:
    """Add ``.ktui/`` to .gitignore; an existing .gitignore keeps every line it had."""
    if not path.exists():
        path.write_text(template("gitignore"), encoding="utf-8")
        return "created"
    text = path.read_text(encoding="utf-8", errors="replace")
    if any(line.strip() in (IGNORE_LINE, ".ktui", "/.ktui", "/.ktui/") for line in text.splitlines()):
        return "already ignores .ktui/"
    path.write_text(text + ("" if text.endswith("\n") or not text else "\n") + IGNORE_LINE + "\n", encoding="utf-8")
    return "appended"
