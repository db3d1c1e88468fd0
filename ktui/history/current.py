"""Whether a stored result is the current one: the one definition of "current result", shared by
the watch's catch-up and the MCP server's ``latest`` and ``verdict``. Current means a finished run of exactly the
kernel's content on disk, judged by exactly its reference on disk (a reference edit makes every
result of its kernels stale, as a kernel edit does)."""

from __future__ import annotations

from ktui.history.store import RunRecord, Store
from ktui.protocol.events import finished_run
from ktui.workspace.kernels import Kernel, content_hash_of, reference_hash_of


def on_disk(kernel: Kernel, content: str, reference: str | None) -> bool:
    """Whether ``content`` (a content hash) and ``reference`` (a reference hash; None: not known, as
    in reports written before they carried it) are the kernel's and its reference's on disk (a file
    that cannot be read matches nothing)."""
    now = content_hash_of(kernel.path)
    if not now or now != content:
        return False
    if reference is None:
        return True
    reference_now = reference_hash_of(kernel)
    return bool(reference_now) and reference_now == reference


def is_current(store: Store, kernel: Kernel) -> bool:
    """Whether the stored result of ``kernel`` is a finished run of exactly what is on disk."""
    run = store.latest_run(kernel.id)
    return run is not None and finished_run(run.verdict) and on_disk(kernel, run.content_hash, run.reference_hash)


def report_is_current(report: dict, kernel: Kernel) -> bool:
    """Whether a report (``.ktui/latest/<kernel>.json``) is for what is on disk now."""
    return on_disk(kernel, str(report.get("content_hash")), report.get("reference_hash"))


def current_run(store: Store, kernel: Kernel, limit: int = 200) -> RunRecord | None:
    """The newest finished run of exactly what is on disk (the kernel's content, judged by its
    reference) among the kernel's last ``limit`` runs, or None: what ``is_current`` asks of the
    latest run alone, asked of the history (a file put back as it was is answered too)."""
    content = content_hash_of(kernel.path)
    if not content:
        return None
    for run in store.runs(kernel.id, limit=limit):
        if run.content_hash == content and finished_run(run.verdict) and on_disk(kernel, run.content_hash,
                                                                                 run.reference_hash):
            return run
    return None
