"""``e``: open the failing file at its line in the user's editor.

Inside tmux the editor opens in a new split beside the dashboard, which keeps running; outside
tmux the dashboard suspends itself while the editor has the terminal. ``$VISUAL`` wins over
``$EDITOR``; both may carry arguments (``code -w``). ``+LINE FILE`` is understood by vi, vim,
nvim, emacs, nano, micro, helix and kakoune; VS Code gets ``--goto FILE:LINE``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

from ktui.tui.state import KernelView


class EditorError(Exception):
    """The editor cannot be started; the message says what to set."""


def failing_place(view: KernelView) -> tuple[str, int]:
    """The first failing rung's file:line where it has one, else the kernel file at line 1."""
    for record in view.rungs:
        loc = (record.get("error") or {}).get("location") or {}
        if record.get("status") not in ("ok", "skipped") and loc.get("file"):
            return str(loc["file"]), int(loc.get("line") or 1)
    return view.path, 1


def editor_argv(file: str, line: int, environ=os.environ) -> list[str]:
    command = environ.get("VISUAL") or environ.get("EDITOR")
    if not command:
        raise EditorError("set $VISUAL or $EDITOR to open files from the dashboard")
    words = shlex.split(command)
    if not words or shutil.which(words[0]) is None:
        raise EditorError(f"the editor {command!r} ($VISUAL/$EDITOR) is not on PATH")
    if os.path.basename(words[0]) in ("code", "code-insiders", "codium"):
        return [*words, "--goto", f"{file}:{line}"]
    return [*words, f"+{line}", file]


def open_in_editor(app, file: str, line: int) -> str:
    """Start the editor; return how (``in a tmux split`` / ``here``)."""
    argv = editor_argv(file, line)
    if os.environ.get("TMUX") and shutil.which("tmux"):
        subprocess.run(["tmux", "split-window", "-h", shlex.join(argv)], check=False,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return "in a tmux split"
    with app.suspend():
        subprocess.run(argv, check=False)
    return "here"
