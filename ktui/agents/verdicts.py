"""The ``verdict`` tool's engine: the finished verdict of the version of a kernel now on disk, in one call.

An agent that saved a kernel while a watch (or ``ktui serve``) owns the workspace wants that
save's verdict without running it a second time. So: the history answers at once when it holds a
finished run of exactly the content and reference on disk (``ktui.history.current.current_run``:
the one definition of a current result). Otherwise the owner is followed (``OwnerLink.follow``):
while it has a run of the kernel queued or in flight the call waits, re-reading the history each
time the owner's queue changes, up to ``timeout_s``; when nothing will run it — no owner, or an
owner with none queued that did not pick up a save within its grace — the answer says so at once
and names ``run``. It never runs anything itself and never waits past its timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from ktui.agents.digest import agent_summary, trust_now
from ktui.dispatch.owner import Following, OwnerGone, OwnerLink
from ktui.history.current import current_run
from ktui.history.store import RunRecord, Store
from ktui.workspace.kernels import Kernel, content_hash_of, reference_hash_of

POLL_S = 0.5  # the history is read again at least this often while waiting
FIRST_ANSWER_S = 5.0  # an owner that does not say within this whether it runs the kernel is taken as gone
FINISHED, NOT_RUN, TIMEOUT = "finished", "not_run", "timeout"


def _result(run: RunRecord, state: Path) -> dict[str, Any]:
    summary = agent_summary(run.summary)
    return {"version": run.version, "verdict": run.verdict, "message": run.message,
            "summary": trust_now(state, run.verdict, summary, run.reference_hash),
            "first_failure": run.summary.get("first_failure"), "tier": run.tier, "device": run.device,
            "strict": run.strict, "started": run.started, "run_dir": run.run_dir}


async def verdict_now(resolve: Callable[[], Kernel], state: Path, shown: str, timeout_s: float) -> dict[str, Any]:
    """The answer for the kernel ``resolve`` reads afresh (its file may change while we wait);
    ``shown``: its path as the agent would pass it to ``run``."""
    started = time.monotonic()
    deadline = started + timeout_s
    link = OwnerLink.connect(state)
    follow: Following | None = None
    busy, grace, idle_since, owner_note = False, None, started, ""
    try:
        if link is not None:
            follow, first = await _follow(link, resolve().path, min(FIRST_ANSWER_S, timeout_s))
            if follow is None:
                owner_note = first
            else:
                busy, grace = first["busy"], first.get("save_grace_s")
        while True:
            kernel = resolve()
            run = _current(state, kernel)
            waited = round(time.monotonic() - started, 2)
            content, reference = content_hash_of(kernel.path), reference_hash_of(kernel)
            answer = {"kernel": kernel.id, "content_hash": content, "reference_hash": reference, "waited_s": waited}
            if run is not None:
                return {**answer, "status": FINISHED, "result": _result(run, state), "message": ""}
            call_run = f"call run with paths=['{shown}'] to run it"
            if follow is None:
                why = owner_note or "no ktui watch or ktui serve owns this workspace"
                return {**answer, "status": NOT_RUN, "result": None,
                        "message": f"{why}, and no finished run of this content is recorded: {call_run}"}
            now = time.monotonic()
            idle_for = now - idle_since
            if not busy and (idle_for >= (grace or 0.0) or now >= deadline):
                words = (f"picked up no save of it within {min(idle_for, grace):.1f} s" if grace is not None
                         else "does not watch the files (ktui serve, an MCP server)")
                return {**answer, "status": NOT_RUN, "result": None,
                        "message": f"the workspace's owner (pid {link.pid}) has no run of this content queued or "
                                   f"running and {words}: {call_run}"}
            if now >= deadline:
                return {**answer, "status": TIMEOUT, "result": None,
                        "message": f"a run of it is still queued or running on the workspace's owner (pid "
                                   f"{link.pid}) after {timeout_s:g} s: call verdict again to keep waiting"}
            wait = min(POLL_S, deadline - now) if busy else min(POLL_S, deadline - now, (grace or 0.0) - idle_for)
            try:
                item = await anyio.to_thread.run_sync(follow.next, max(wait, 0.01))
            except (OwnerGone, RuntimeError) as exc:
                follow.close()
                follow, owner_note = None, str(exc)
                continue
            if item is not None:
                if busy and not item.get("busy"):
                    idle_since = time.monotonic()  # a run ended: a save may follow it (a stale run, cancelled)
                busy, grace = bool(item.get("busy")), item.get("save_grace_s")
    finally:
        if follow is not None:
            follow.close()


async def _follow(link: OwnerLink, path: Path, timeout_s: float) -> tuple[Following | None, Any]:
    """Following the kernel at ``path`` and the owner's first word on it, or None and why not."""
    try:
        follow = link.follow(path)
    except OSError as exc:
        return None, f"the workspace's owner (pid {link.pid}) could not be asked: {exc}"
    try:
        first = await anyio.to_thread.run_sync(follow.next, timeout_s)
    except (OwnerGone, RuntimeError) as exc:
        first = None
        why = f"the workspace's owner (pid {link.pid}) could not follow it: {exc}"
    else:
        why = f"the workspace's owner (pid {link.pid}) did not answer within {timeout_s:g} s"
    if first is None:
        follow.close()
        return None, why
    return follow, first


def _current(state: Path, kernel: Kernel) -> RunRecord | None:
    store = Store.of(state)
    try:
        return current_run(store, kernel)
    finally:
        store.close()
