"""Screenshots of the dashboard from real runs: Textual's own ``save_screenshot`` (SVG).

    python3 screenshots/make_screenshots.py --name cpu --cpu                # on a machine without a GPU
    python3 screenshots/make_screenshots.py --name h200 --profile --panes 3,5 \
        --kernels softmax_triton,add_triton                                 # on the H200
    python3 screenshots/make_screenshots.py --only errormap --cpu           # the error map (any machine)
    python3 screenshots/make_screenshots.py --only roofline                 # the roofline, from RECORDED figures

``--only errormap`` runs the kernel with a planted missing tail mask
(tests/fixtures/kernels/tail_mask_missing.py) in the real dashboard and writes
``errormap-160x48.svg`` and ``errormap-80x24.svg``: the rungs pane with its error map. ``--only
roofline`` runs nothing: it replays the benchmark runs an NVIDIA H200 recorded
(tests/fixtures/gpu/roofline, rebuilt from docs/measured.md by its make_history.py) into a fresh
workspace and writes ``roofline-h200-recorded-160x48.svg`` and ``-80x24.svg``: the history pane's
roofline (``o``) of rmsnorm_triton's three versions. Those figures are a recording, not a live run:
made on the H200 itself (with its own calibration and kernels) the chart would show that run.

Without ``--workspace`` it builds a fresh workspace from the repository's kernels/ and references/
plus one kernel that does not compile, runs them all in the real dashboard (the watch loop, a real
worker), then saves two more versions of softmax_triton the way an agent does (temp file +
rename) — one with a wrong normaliser, one that multiplies by the reciprocal of the sum — so the
history and the SASS diff have something to show. ``--profile`` presses ``p`` on the shown kernel
and waits for the Nsight Compute summary. Then it writes ``<out>/<name>-160x48.svg`` (panes side by
side) and ``<out>/<name>-80x24-<pane>.svg`` for each pane in ``--panes`` (the tabbed layout).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "dashboard"))
sys.path.insert(0, str(REPO / "tests"))

from conftest import make_workspace  # noqa: E402
from h200_history import replay_h200_history  # noqa: E402  (the H200's recorded benchmark runs)
from record import VERSIONS  # noqa: E402  (the softmax variants the snapshot fixture records)

from ktui.protocol.job import Options  # noqa: E402
from ktui.protocol.notices import ProfileFinished  # noqa: E402
from ktui.tui.app import KtuiApp, WatchItem  # noqa: E402
from ktui.watch.loop import WatchSettings  # noqa: E402
from ktui.workspace.folder import Workspace  # noqa: E402
from ktui.workspace.kernels import content_hash  # noqa: E402

WIDE = (160, 48)
NARROW = (80, 24)


def fresh_workspace(kernels: list[str] | None) -> Path:
    """The repository's references, its kernels (or the ``kernels`` named), and compile_error."""
    ws = Path(tempfile.mkdtemp(prefix="ktui-screens-")) / "workspace"
    shutil.copytree(REPO / "references", ws / "references")
    (ws / "kernels").mkdir()
    for path in sorted((REPO / "kernels").glob("*.py")):
        if kernels is None or path.stem in kernels:
            shutil.copy(path, ws / "kernels" / path.name)
    shutil.copy(REPO / "tests" / "fixtures" / "kernels" / "compile_error.py", ws / "kernels" / "compile_error.py")
    return ws


def save_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def until(pilot, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.2)


def idle(app: KtuiApp) -> bool:
    q = app.state.queue
    return q.running is None and not q.queued and all(v.state not in ("queued", "running") for v in app.state.kernels.values())


class Recorder(KtuiApp):
    """The dashboard, remembering whether a profile finished (the screenshot waits for it).
    Textual calls this handler and then KtuiApp's own, so the dashboard is unchanged."""

    profiles_done: list[ProfileFinished]

    def on_watch_item(self, message: WatchItem) -> None:
        if isinstance(message.item, ProfileFinished):
            self.profiles_done.append(message.item)


async def shoot(args: argparse.Namespace, ws: Path) -> list[Path]:
    app = Recorder(Workspace.at(ws), Options(force_cpu=args.cpu), WatchSettings())
    app.profiles_done = []
    written: list[Path] = []
    started = time.monotonic()

    def progress(what: str) -> None:
        print(f"{time.monotonic() - started:6.1f} s  {what}", flush=True)

    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: idle(app) and all(v.version for v in app.state.kernels.values()),
                    args.timeout, "the first run of every kernel")
        progress("first runs: " + ", ".join(f"{v.id} {v.verdict}" for v in app.state.kernels.values()))
        if args.versions:
            path = ws / "kernels" / "softmax_triton.py"
            for text in VERSIONS["softmax_triton"][1:]:
                save_atomically(path, text)
                digest = content_hash(text.encode())
                await until(pilot, lambda d=digest: idle(app) and app.state.kernels["softmax_triton"].content_hash == d,
                            args.timeout, "softmax_triton's new version")
                view = app.state.kernels["softmax_triton"]
                progress(f"softmax_triton v{view.version} {view.verdict}")
        app._select(args.kernel)
        if args.profile:
            await pilot.press("p")
            await until(pilot, lambda: bool(app.profiles_done), args.timeout, "the ncu profile")
            done = app.profiles_done[-1]
            progress(f"profile: {'ok' if done.ok else 'FAILED'} — {done.message}")
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause(0.5)
        out = args.out / f"{args.name}-{WIDE[0]}x{WIDE[1]}.svg"
        app.save_screenshot(filename=out.name, path=str(out.parent))
        written.append(out)
        await pilot.resize_terminal(*NARROW)
        await pilot.pause(0.5)
        for pane in args.panes:
            await pilot.press(str(pane))
            await app.workers.wait_for_complete()
            await pilot.pause(0.5)
            out = args.out / f"{args.name}-{NARROW[0]}x{NARROW[1]}-{pane}.svg"
            app.save_screenshot(filename=out.name, path=str(out.parent))
            written.append(out)
    return written


async def shoot_errormap(args: argparse.Namespace) -> list[Path]:
    """The rungs pane's error map of a real run of the planted tail-mask bug."""
    ws = Path(tempfile.mkdtemp(prefix="ktui-screens-")) / "workspace"
    make_workspace(ws, fixtures=["tail_mask_missing"])
    app = Recorder(Workspace.at(ws), Options(force_cpu=args.cpu), WatchSettings())
    app.profiles_done = []
    written = []
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: idle(app) and all(v.version for v in app.state.kernels.values()),
                    args.timeout, "the run of tail_mask_missing")
        view = app.state.kernels["tail_mask_missing"]
        print(f"tail_mask_missing v{view.version} {view.verdict}: {view.summary.get('first_failure')}", flush=True)
        app._select("tail_mask_missing")
        for size in (WIDE, NARROW):
            await pilot.resize_terminal(*size)
            await pilot.press("2")
            await app.workers.wait_for_complete()
            await pilot.pause(0.5)
            written.append(_save(app, args.out / f"errormap-{size[0]}x{size[1]}.svg"))
    return written


async def shoot_roofline(args: argparse.Namespace) -> list[Path]:
    """The history pane's roofline, drawn from the H200's recorded figures (no GPU is used)."""
    ws, now = replay_h200_history(Path(tempfile.mkdtemp(prefix="ktui-screens-")) / "workspace")
    app = KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)
    written = []
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        app._select("rmsnorm_triton")
        await pilot.press("o")
        for size in (WIDE, NARROW):
            await pilot.resize_terminal(*size)
            await pilot.press("3")
            await app.workers.wait_for_complete()
            await pilot.pause(0.5)
            written.append(_save(app, args.out / f"roofline-h200-recorded-{size[0]}x{size[1]}.svg"))
    return written


def _save(app: KtuiApp, out: Path) -> Path:
    app.save_screenshot(filename=out.name, path=str(out.parent))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workspace", type=Path, default=None, help="an existing workspace (default: a fresh one)")
    ap.add_argument("--kernel", default="softmax_triton", help="the kernel to show")
    ap.add_argument("--kernels", default=None,
                    help="a fresh workspace gets only these of the repository's kernels, e.g. softmax_triton,add_triton")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="where the SVGs go")
    ap.add_argument("--name", default="cpu", help="file name prefix, e.g. cpu or h200")
    ap.add_argument("--panes", default="2", help="panes for the 80x24 shots, e.g. 2,3,5")
    ap.add_argument("--profile", action="store_true", help="press p and wait for the ncu summary (GPU)")
    ap.add_argument("--cpu", action="store_true", help="the CPU tier even where a GPU exists")
    ap.add_argument("--no-versions", dest="versions", action="store_false",
                    help="do not save the extra softmax_triton versions")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each step")
    ap.add_argument("--only", choices=("errormap", "roofline"), default=None,
                    help="only the error map of a planted tail-mask bug (a real run), or only the roofline chart "
                         "(from the H200's recorded figures)")
    args = ap.parse_args()
    args.panes = [int(p) for p in args.panes.split(",") if p.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only:
        shots = shoot_errormap(args) if args.only == "errormap" else shoot_roofline(args)
        for path in asyncio.run(shots):
            print(f"wrote {path}", flush=True)
        return 0
    names = [k.strip() for k in args.kernels.split(",")] if args.kernels else None
    ws = args.workspace.resolve() if args.workspace else fresh_workspace(names)
    if args.versions and not (ws / "kernels" / "softmax_triton.py").is_file():
        args.versions = False
    print(f"workspace: {ws}", flush=True)
    for path in asyncio.run(shoot(args, ws)):
        print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
