"""What the dashboard knows, built only from the watch loop's events, its notices and the history.

No Textual here: the app feeds every event and notice to ``DashboardState.apply`` and hands the
resulting views down to its panes. A restart loses nothing: ``load`` rebuilds the same views from
the history store (read through ``versions.py``), so what was shown before is shown again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ktui.dispatch.trust import AuditState, current, judge, with_trust
from ktui.history.best import best_version
from ktui.history.store import Store
from ktui.protocol import sandbox
from ktui.protocol.events import (
    PASSED,
    Event,
    RunFinished,
    RungFinished,
    RungStarted,
    RunStarted,
)
from ktui.protocol.job import rung_family
from ktui.protocol.notices import (
    AuditFinished,
    JobProblem,
    Notice,
    ProfileFinished,
    ProfileProgress,
    QueueChanged,
    RerunsStopped,
    RunnerReady,
    Saved,
    WatchStateChanged,
    WorkspaceNote,
)
from ktui.tui.text import STATUS_LABELS
from ktui.tui.versions import latest_finished, version_history, worst_fraction
from ktui.workspace.kernels import Kernel, content_hash_of, reference_hash_of

NEVER_RUN = "new"
QUEUED = "queued"
RUNNING = "running"
PROBLEM = "error"


OUTPUT_KEPT = 2000  # printed lines a view keeps while its run goes on (output.txt has them all)

@dataclass
class KernelView:
    """One kernel as the panes show it: the run on screen (live or last) and its standing."""

    id: str
    path: str
    reference: str = ""
    state: str = NEVER_RUN  # new | queued | running | a verdict (passed, failed, crashed, …)
    rung: str = ""  # the rung in flight while running
    rung_note: str = ""  # what it says it is doing (the GPU's one-time calibration), "" when it says nothing
    version: int | None = None
    run_id: str = ""
    run_dir: str = ""
    content_hash: str = ""  # what the shown run ran
    reference_hash: str = ""
    disk_hash: str = ""  # what the kernel file holds now
    disk_reference_hash: str = ""
    tier: str = ""
    device: str = ""
    arch: str = ""
    started: float | None = None
    finished: float | None = None
    duration_s: float = 0.0
    verdict: str = ""  # the shown run's verdict ("" while it runs)
    message: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    rungs: list[dict[str, Any]] = field(default_factory=list)
    shapes: tuple[int, int] = (0, 0)  # (test shapes, benchmark shapes) from the pre-checks
    output: list[str] = field(default_factory=list)  # what the run in this view printed, as it came
    best_speedup: float | None = None
    best_version: int | None = None
    problem: str = ""  # a job that could not run at all
    weak_test: tuple[str, ...] = ()  # why the audit of its reference says its test is weak; (): not weak or not audited

    @property
    def stale(self) -> bool:
        """The shown results are not for what is on disk now (the file or its reference changed)."""
        if not self.content_hash or not self.disk_hash:
            return False
        if self.content_hash != self.disk_hash:
            return True
        return bool(self.disk_reference_hash) and self.reference_hash != self.disk_reference_hash

    @property
    def last_speedup(self) -> float | None:
        value = self.summary.get("speedup")
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def roofline(self) -> float | None:
        """The worst benchmark shape's fraction of its attainable time (never a mean across shapes)."""
        return worst_fraction(self.summary)

    @property
    def satisfied(self) -> bool | None:
        value = self.summary.get("satisfied")
        return value if isinstance(value, bool) else None

    def rung_progress(self) -> str:
        """The rung in flight in a few characters: ``compile``, ``check 3/6``, ``bench 1/3``,
        ``bench 1/3 · calibrating the GPU``; between two rungs the last one finished, with its
        status (``check 3/6 ✓``); ``starting`` before the first."""
        if self.rung:
            progress = self._rung_progress(self.rung, before=1)
            return f"{progress} · {self.rung_note.split(':')[0]}" if self.rung_note else progress
        if self.state != RUNNING:
            return ""
        if not self.rungs:
            return "starting"
        last = self.rungs[-1]
        return f"{self._rung_progress(last['rung'], before=0)} {STATUS_LABELS.get(last['status'], ('?', ''))[0]}"

    def _rung_progress(self, rung: str, before: int) -> str:
        """``rung``'s place among its family: ``before`` 1 for the rung in flight (not yet among the
        finished ones), 0 for the last one finished."""
        family = rung_family(rung)
        tests, benches = self.shapes
        if family == "correctness":
            done = sum(1 for r in self.rungs if r["rung"].startswith("correctness["))
            return f"check {done + before}/{tests}" if tests else "check"
        if family == "benchmark":
            done = sum(1 for r in self.rungs if r["rung"].startswith("benchmark["))
            return f"bench {done + before}/{benches}" if benches else "bench"
        return family

    def find_rung(self, name: str) -> dict[str, Any] | None:
        return next((r for r in self.rungs if r["rung"] == name), None)


@dataclass(frozen=True)
class ProfileStatus:
    """A profile of one kernel: in progress (with its last progress line) or finished."""

    message: str
    running: bool
    ok: bool | None = None


@dataclass
class DashboardState:
    root: Path
    kernels: dict[str, KernelView] = field(default_factory=dict)
    tier: str = ""
    device: str = ""
    arch: str = ""
    gpus: tuple[str, ...] = ()  # one worker per GPU: their indices (the runner's, not a run's)
    unconfined: str = ""  # "not confined: <why>" where the worker lets user code write anywhere
    watcher: str = "starting"
    watcher_reason: str = ""
    queue: QueueChanged = field(default_factory=lambda: QueueChanged(None, ()))
    note: str = ""  # the workspace's problem, if any
    problem: str = ""  # the last problem not tied to a kernel (the worker would not start)
    profiles: dict[str, ProfileStatus] = field(default_factory=dict)
    on_disk: dict[str, Kernel] = field(default_factory=dict)  # id → the kernel as discovered
    audits: dict[str, AuditFinished] = field(default_factory=dict)  # reference hash → its audit

    # -- from the disk and the history ---------------------------------------------------------
    def load(self, store: Store, kernels: list[Kernel]) -> None:
        """Views for the kernels on disk, filled from each one's latest stored run."""
        self.kernels = {}
        for kernel in kernels:
            self.add_kernel(kernel, store)

    def add_kernel(self, kernel: Kernel, store: Store | None = None) -> KernelView:
        view = KernelView(id=kernel.id, path=str(kernel.path), reference=str(kernel.reference or ""))
        view.disk_hash = content_hash_of(kernel.path)
        view.disk_reference_hash = reference_hash_of(kernel)
        self.on_disk[kernel.id] = kernel
        if kernel.reference is None:
            view.problem = kernel.reference_error
        if store is not None:
            run = latest_finished(store, kernel.id)
            if run is not None:
                view.state = run.verdict
                view.verdict = run.verdict
                view.version = run.version
                view.run_id = run.run_id
                view.run_dir = run.run_dir
                view.content_hash = run.content_hash
                view.reference_hash = run.reference_hash
                view.tier, view.device, view.arch = run.tier, run.device, run.arch
                view.started, view.finished = run.started, run.finished
                view.duration_s = run.duration_s or 0.0
                view.message = run.message
                view.summary = with_trust(run.summary, current(store.path.parent, run.verdict, run.summary,
                                                               run.reference_hash))  # trust as it is now
                view.rungs = store.rungs(run.run_id)
                view.shapes = _shapes(view.rungs)
                if not self.tier and run.tier not in ("", "-"):
                    self.tier, self.device, self.arch = run.tier, run.device, run.arch
            best = best_version(version_history(store, kernel.id))
            if best is not None:
                view.best_version, view.best_speedup = best.version, best.speedup
        self._judge_test(view)
        self.kernels[kernel.id] = view
        self.kernels = dict(sorted(self.kernels.items()))
        return view

    # -- from the loop -------------------------------------------------------------------------
    def apply(self, item: Event | Notice) -> set[str]:
        """Take in one event or notice; return the ids of the kernels whose view changed
        (``""`` in the set means the status bar changed)."""
        handler = _HANDLERS.get(type(item))
        return handler(self, item) if handler is not None else set()

    def _run_started(self, item: RunStarted) -> set[str]:
        view = self.kernels.get(item.kernel)
        if view is None:
            return set()
        view.state, view.rung, view.rung_note, view.verdict = RUNNING, "", "", ""
        view.version, view.run_id, view.run_dir = item.version, item.run_id, item.run_dir
        view.content_hash, view.reference_hash = item.content_hash, item.reference_hash
        view.started, view.finished, view.message, view.summary = item.time, None, "", {}
        if view.problem and self.problem == view.problem:  # its re-runs had stopped: they no longer are
            self.problem = ""
        view.rungs, view.shapes, view.problem, view.output = [], (0, 0), "", []
        self._judge_test(view)
        if item.tier not in ("", "-"):
            view.tier, view.device, view.arch = item.tier, item.device, item.arch
            self.tier, self.device, self.arch = item.tier, item.device, item.arch
            self.unconfined = unconfined_text(item.confined, item.confinement)
        return {view.id, ""}

    def _rung_started(self, item: RungStarted) -> set[str]:
        view = self._by_run(item.run_id)
        if view is None:
            return set()
        view.rung, view.rung_note = item.rung, item.note
        return {view.id}

    def _rung_finished(self, item: RungFinished) -> set[str]:
        view = self._by_run(item.run_id)
        if view is None:
            return set()
        view.rung, view.rung_note = "", ""
        record = item.to_json()
        view.rungs.append({k: record[k] for k in ("rung", "status", "figures", "message", "error", "duration_s")})
        if item.rung == "pre-checks":
            view.shapes = _shapes(view.rungs)
        return {view.id}

    def _run_finished(self, item: RunFinished) -> set[str]:
        view = self._by_run(item.run_id)
        if view is None:
            return set()
        view.rung, view.rung_note = "", ""
        view.verdict, view.message, view.summary = item.verdict, item.message, item.summary
        view.finished, view.duration_s = item.time, item.duration_s
        view.state = item.verdict
        self._judge_test(view)
        speedup = view.last_speedup
        if item.verdict == PASSED and speedup is not None and (view.best_speedup is None or speedup > view.best_speedup):
            view.best_speedup, view.best_version = speedup, view.version
        return {view.id}

    def add_output(self, run_id: str, lines: list[str]) -> set[str]:
        """Lines a run printed (batched by the app: one message per burst, not per line)."""
        view = self._by_run(run_id)
        if view is None:
            return set()
        view.output.extend(lines)
        del view.output[:-OUTPUT_KEPT]
        return {view.id}

    def _queue_changed(self, item: QueueChanged) -> set[str]:
        if item.seq and item.seq < self.queue.seq:
            return set()  # taken before the one shown (another thread's notice overtook it): stale
        changed = {""}
        queued = set(item.queued)
        for view in self.kernels.values():
            want = view.state
            if view.id == item.running or view.id in item.also_running:
                want = RUNNING
            elif view.id in queued:
                want = QUEUED
            elif view.state in (QUEUED, RUNNING):
                want = view.verdict or NEVER_RUN
            if want != view.state:
                view.state = want
                changed.add(view.id)
        self.queue = item
        return changed

    def _saved(self, item: Saved) -> set[str]:
        changed = set()
        for kernel_id in item.kernels:
            view = self.kernels.get(kernel_id)
            if view is None:
                continue
            if item.path == view.path:
                view.disk_hash = item.content_hash or ""
            elif kernel_id in self.on_disk:  # its reference or a file the reference needs
                view.disk_reference_hash = reference_hash_of(self.on_disk[kernel_id])
                self._judge_test(view)
            changed.add(kernel_id)
        return changed

    def _audit_finished(self, item: AuditFinished) -> set[str]:
        self.audits[item.reference_hash] = item
        changed = {view.id for view in self.kernels.values() if self._judge_test(view)}
        audit = AuditState(item.verdict, tuple(item.reasons), item.message)
        for view in self.kernels.values():  # a pass shown pending is settled by its reference's audit
            if view.reference_hash == item.reference_hash and "trusted" in view.summary:
                view.summary = with_trust(view.summary, judge(view.verdict, view.summary, audit))
                changed.add(view.id)
        return changed | {""} if changed else set()  # the status line says it for the selected kernel

    def _judge_test(self, view: KernelView) -> bool:
        """Set ``view.weak_test`` from the audit of the reference its shown run was judged by (the
        one on disk before it ran); True when it changed."""
        audit = self.audits.get(view.reference_hash or view.disk_reference_hash)
        weak: tuple[str, ...] = ()
        if audit is not None and audit.verdict == "weak":
            weak = tuple(audit.reasons) or ("",)
        if not weak and view.summary.get("weak_test") is not None:  # the run found a cached weak audit
            weak = tuple(view.summary.get("weak_test_reasons") or [view.summary["weak_test"]])
        if weak == view.weak_test:
            return False
        view.weak_test = weak
        return True

    def _job_problem(self, item: JobProblem) -> set[str]:
        view = self.kernels.get(item.kernel)
        if view is None:
            self.problem = item.message
            return {""}
        view.problem = item.message
        if view.state in (QUEUED, RUNNING):
            view.state = view.verdict or PROBLEM
        return {view.id}

    def _reruns_stopped(self, item: RerunsStopped) -> set[str]:
        """Said on the status line and in the kernel's panes until it runs again."""
        self.problem = item.message
        view = self.kernels.get(item.kernel)
        if view is None:
            return {""}
        view.problem = item.message
        return {view.id, ""}

    def _profile_progress(self, item: ProfileProgress) -> set[str]:
        self.profiles[item.kernel] = ProfileStatus(item.message, running=True)
        return {item.kernel, ""}

    def _profile_finished(self, item: ProfileFinished) -> set[str]:
        self.profiles[item.kernel] = ProfileStatus(item.message, running=False, ok=item.ok)
        return {item.kernel, ""}

    def _runner_ready(self, item: RunnerReady) -> set[str]:
        self.tier, self.device, self.arch = item.tier, item.device, item.arch
        self.gpus = item.gpus
        self.unconfined = unconfined_text(item.confined, item.confinement)
        self.problem = ""
        return {""}

    def _watch_state_changed(self, item: WatchStateChanged) -> set[str]:
        self.watcher, self.watcher_reason = item.mode, item.reason
        return {""}

    def _workspace_note(self, item: WorkspaceNote) -> set[str]:
        self.note = item.message
        return {""}

    def activity(self) -> str:
        """Profiles and background audits in progress, for the status bar."""
        running = [f"profiling {k}: {s.message}" for k, s in self.profiles.items() if s.running]
        if self.queue.background:  # an audit of a reference, in the background
            running.append(self.queue.background)
        return " · ".join(running)

    def _by_run(self, run_id: str) -> KernelView | None:
        return next((v for v in self.kernels.values() if v.run_id == run_id), None)

    def remove(self, kernel_id: str) -> None:
        self.kernels.pop(kernel_id, None)
        self.on_disk.pop(kernel_id, None)


def unconfined_text(confined: bool | None, confinement: str) -> str:
    """What the status line warns of: "" when every protection of the sandbox held or nothing is
    known, else what did not (``protocol.sandbox``)."""
    return sandbox.warning(confined, confinement)


# One handler per event and notice type; anything else changes nothing on screen (``output``).
_HANDLERS: dict[type, Callable[[DashboardState, Any], set[str]]] = {
    RunStarted: DashboardState._run_started,
    RungStarted: DashboardState._rung_started,
    RungFinished: DashboardState._rung_finished,
    RunFinished: DashboardState._run_finished,
    QueueChanged: DashboardState._queue_changed,
    Saved: DashboardState._saved,
    JobProblem: DashboardState._job_problem,
    RerunsStopped: DashboardState._reruns_stopped,
    ProfileProgress: DashboardState._profile_progress,
    ProfileFinished: DashboardState._profile_finished,
    RunnerReady: DashboardState._runner_ready,
    WatchStateChanged: DashboardState._watch_state_changed,
    WorkspaceNote: DashboardState._workspace_note,
    AuditFinished: DashboardState._audit_finished,
}


def _shapes(rungs: list[dict[str, Any]]) -> tuple[int, int]:
    pre = next((r for r in rungs if r["rung"] == "pre-checks"), None)
    figures = (pre or {}).get("figures") or {}
    tests, benches = figures.get("tests", 0), figures.get("benchmarks", 0)
    return (tests if isinstance(tests, int) else 0, benches if isinstance(benches, int) else 0)
