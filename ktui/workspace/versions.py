"""Which stored version of a kernel a reader means when it names none (``diff``, ``pin``, the
agents' ``diff`` and ``dump``): one answer for the CLI and the MCP server."""

from __future__ import annotations

import os

from ktui.workspace.kernels import content_hash


def current_version(store, kernel, rerun: str = "") -> tuple[int | None, str]:
    """The version to look at: the file's current content if stored, else the newest run's (with a
    note that ends with ``rerun``, the surface's words for running it: default, ``ktui run``'s)."""

    digest = content_hash(kernel.path.read_bytes())
    version = store.version_of_hash(kernel.id, digest)
    if version is not None:
        return version, ""
    latest = store.latest_run(kernel.id)
    if latest is None:
        return None, ""
    rerun = rerun or f"run `ktui run {os.path.relpath(kernel.path)}` to see the new code"
    return latest.version, f"{kernel.path.name} changed since v{latest.version} was run; showing v{latest.version} ({rerun})"
