"""Which run folder a tool reads: a stored version of a kernel, by default the file's current one.

``dump``, ``hotspots``, ``output`` and the dump resources all read one version's run folder
(``.ktui/runs/<kernel>/<version>/``); this is the one place that picks it.
"""

from __future__ import annotations

from pathlib import Path

from ktui.agents.workspace import AgentWorkspace, BadCall
from ktui.history.store import Store
from ktui.protocol.statedir import run_dir
from ktui.workspace.kernels import state_dir
from ktui.workspace.versions import current_version


def stored_folder(workspace: AgentWorkspace, kernel: str, version: int | None) -> tuple[str, int, Path]:
    """A stored version's run folder (default: the file's current version, else the newest run)."""
    kernel_id = workspace.kernel_id(kernel)
    try:
        k = workspace.kernel(kernel)
        state = state_dir(k.root)
    except BadCall:
        k, state = None, workspace.state
    store = Store.of(state)
    try:
        if version is None:
            version = current_version(store, k)[0] if k is not None else None
            if version is None and (run := store.latest_run(kernel_id)) is not None:
                version = run.version
        if version is None:
            raise BadCall(f"{kernel_id} has no stored versions yet: call run first")
        stored = [r for r in store.runs(kernel_id) if r.version == version]
    finally:
        store.close()
    return kernel_id, version, (Path(stored[0].run_dir) if stored else run_dir(state, kernel_id, version))
