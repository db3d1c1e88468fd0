"""How light and how quick the dashboard is: the real ``ktui watch`` in a pseudo-terminal.

    python tests/benchmarks/dashboard_perf.py [--kernels 50] [--idle-s 30] [--cpu] [--json OUT.json]

1. idle: ``--kernels`` kernels with current results (one ``ktui run`` beforehand), the app
   watching and idle — CPU (% of one core) and RSS of the app process, and of its worker;
2. save → "running": a kernel saved with temp file + rename; the time until the app writes the
   running glyph (▶) to the terminal, over 10 saves;
3. key press during a run: while a kernel hangs in its compile rung, ``j``/``k`` alternately; the
   time from writing the key to the terminal until the app's first output byte (its redraw);
4. burst: 100 saves of one file within one second — how many runs it caused, whether the last one
   ran the final content and passed, and whether any process is left after ``q``.

Everything is measured from the outside, on the bytes the app writes to its terminal, so it
includes Textual's rendering. Targets (issue 3): idle < 2% of a core and < 200 MB RSS, key < 100 ms,
save → running < 300 ms (with the default 150 ms debounce), burst ≤ 2 runs, no leftovers.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import shutil
import signal
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ktui.workspace.kernels import content_hash  # noqa: E402

ADD = (REPO / "kernels" / "add_triton.py").read_text()
HANG = (REPO / "tests" / "fixtures" / "kernels" / "hang.py").read_text()
RUNNING = "▶".encode()
CLK = os.sysconf("SC_CLK_TCK")


class Terminal:
    """The app on a pty: every chunk it writes, with the time it arrived."""

    def __init__(self, argv: list[str], cwd: Path, env: dict, cols: int = 120, rows: int = 40):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True)
        os.close(slave)
        self.chunks: list[tuple[float, bytes]] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.cond:
                self.chunks.append((time.perf_counter(), data))
                self.cond.notify_all()

    def send(self, data: bytes) -> float:
        t = time.perf_counter()
        os.write(self.master, data)
        return t

    def first_output_after(self, t0: float, timeout: float = 5.0) -> float | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                after = [ts for ts, _ in self.chunks if ts > t0]
                if after:
                    return min(after)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def find_after(self, t0: float, needle: bytes, timeout: float = 30.0) -> float | None:
        """When ``needle`` first appeared in what was written after ``t0``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                buf = b""
                marks = []
                for ts, data in self.chunks:
                    if ts > t0:
                        buf += data
                        marks.append((len(buf), ts))
                at = buf.find(needle)
                if at >= 0:
                    return next(ts for end, ts in marks if end > at)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.5))

    def quiet(self, seconds: float = 0.3, timeout: float = 10.0) -> None:
        """Wait until the app has written nothing for ``seconds``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.cond:
                last = self.chunks[-1][0] if self.chunks else 0.0
            if time.perf_counter() - last >= seconds:
                return
            time.sleep(0.05)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tagged(tag: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"KTUI_BENCH_TAG={tag}".encode() in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def workers_of(tag: str, app_pid: int) -> list[int]:
    return [p for p in tagged(tag) if p != app_pid and b"ktui.worker.main" in Path(f"/proc/{p}/cmdline").read_bytes()]


def save(path: Path, text: str) -> float:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(text)
    t = time.perf_counter()
    os.replace(tmp, path)
    return t


def runs_of(db: Path, kernel: str) -> list[tuple[str, str, float]]:
    with sqlite3.connect(db, timeout=30) as conn:
        return conn.execute("SELECT verdict, content_hash, started FROM runs WHERE kernel=? ORDER BY started",
                            (kernel,)).fetchall()


def wait_for_run(db: Path, kernel: str, digest: str, timeout: float = 180.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for verdict, h, _ in reversed(runs_of(db, kernel)):
            if h == digest and verdict not in ("running", "cancelled"):
                return verdict
        time.sleep(0.2)
    raise SystemExit(f"{kernel}: no finished run of {digest} within {timeout:.0f} s")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", type=int, default=50)
    ap.add_argument("--idle-s", type=float, default=30.0)
    ap.add_argument("--cpu", action="store_true", help="force the CPU tier")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    ws = Path(tempfile.mkdtemp(prefix="ktui-dash-perf-"))
    (ws / "kernels").mkdir()
    shutil.copytree(REPO / "references", ws / "references")
    for i in range(args.kernels):
        (ws / "kernels" / f"add_k{i:02d}.py").write_text(ADD)
    tag = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(REPO), "KTUI_BENCH_TAG": tag, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    extra = ["--cpu"] if args.cpu else []
    results: dict = {"kernels": args.kernels}

    print(f"workspace {ws}: running {args.kernels} kernels once so the app starts with current results…", flush=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ktui", "run", "kernels", "--no-bench", "--seed", "0", *extra],
                   cwd=ws, env=env, capture_output=True, check=False, timeout=3600)
    print(f"  done in {time.perf_counter() - t:.0f} s", flush=True)

    term = Terminal([sys.executable, "-m", "ktui", "watch", ".", "--no-bench", "--seed", "0", *extra], ws, env)
    app = term.proc.pid
    db = ws / ".ktui" / "history.db"
    try:
        if term.find_after(0.0, b"watch: inotify", timeout=120) is None and \
                term.find_after(0.0, b"watch: polling", timeout=1) is None:
            raise SystemExit("the app did not report its watcher")
        deadline = time.monotonic() + 240
        while not workers_of(tag, app) and time.monotonic() < deadline:
            time.sleep(0.2)
        worker = workers_of(tag, app)
        term.quiet(2.0, timeout=60)

        # 1. idle
        c0, w0, t0 = cpu_seconds(app), sum(cpu_seconds(p) for p in worker), time.perf_counter()
        time.sleep(args.idle_s)
        c1, w1, t1 = cpu_seconds(app), sum(cpu_seconds(p) for p in worker), time.perf_counter()
        results["idle"] = {
            "seconds": round(t1 - t0, 1),
            "app_cpu_pct": round(100 * (c1 - c0) / (t1 - t0), 2),
            "app_rss_mb": round(rss_mb(app), 1),
            "worker_cpu_pct": round(100 * (w1 - w0) / (t1 - t0), 2),
            "worker_rss_mb": round(sum(rss_mb(p) for p in worker), 1),
        }
        print("idle:", results["idle"], flush=True)

        # 2. save → running on screen
        target = ws / "kernels" / "add_k00.py"
        latencies = []
        for i in range(10):
            text = ADD + f"\n# edit {i}\n"
            t_save = save(target, text)
            seen = term.find_after(t_save, RUNNING, timeout=30)
            if seen is not None:
                latencies.append((seen - t_save) * 1000)
            wait_for_run(db, "add_k00", content_hash(text.encode()))
            term.quiet(1.0)  # the finished run's last frames are out before the next save
        results["save_to_running_ms"] = {"n": len(latencies), "p50": round(statistics.median(latencies), 1),
                                         "p90": round(pct(latencies, 0.9), 1), "max": round(max(latencies), 1)}
        print("save → running (ms):", results["save_to_running_ms"], flush=True)

        # 3. keys while a kernel hangs in its compile rung
        hang = ws / "kernels" / "add_zz_hang.py"
        t_save = save(hang, HANG)
        if term.find_after(t_save, RUNNING, timeout=60) is None:
            raise SystemExit("the hanging kernel never showed as running")
        time.sleep(2.0)
        term.quiet(0.3)
        keys = []
        for i in range(20):
            t_key = term.send(b"k" if i % 2 == 0 else b"j")  # follow mode selected the last row
            first = term.first_output_after(t_key, timeout=5)
            if first is not None:
                keys.append((first - t_key) * 1000)
            time.sleep(0.25)
            term.quiet(0.2)
        results["key_during_run_ms"] = {"n": len(keys), "p50": round(statistics.median(keys), 1),
                                        "p90": round(pct(keys, 0.9), 1), "max": round(max(keys), 1)}
        print("key press during a run (ms):", results["key_during_run_ms"], flush=True)
        fixed = ADD + "\n# no longer hangs\n"
        save(hang, fixed)
        wait_for_run(db, "add_zz_hang", content_hash(fixed.encode()))

        # 4. a burst of 100 saves of one file in one second
        burst = ws / "kernels" / "add_k01.py"
        before = len(runs_of(db, "add_k01"))
        start = time.perf_counter()
        for i in range(100):
            last = ADD + f"\n# burst {i}\n"
            save(burst, last)
            time.sleep(max(0.0, start + (i + 1) * 0.01 - time.perf_counter()))
        burst_s = time.perf_counter() - start
        verdict = wait_for_run(db, "add_k01", content_hash(last.encode()))
        time.sleep(3.0)  # anything still queued would have started by now
        runs = runs_of(db, "add_k01")[before:]
        results["burst"] = {"saves": 100, "seconds": round(burst_s, 2), "runs": len(runs),
                            "final_content_ran": runs[-1][1] == content_hash(last.encode()), "final_verdict": verdict}
        print("burst:", results["burst"], flush=True)
    finally:
        term.send(b"q")
        try:
            code = term.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(term.proc.pid, signal.SIGKILL)
            code = "killed after 30 s"
        time.sleep(1.0)
        left = tagged(tag)
        results["quit"] = {"exit_code": code, "leftover_processes": len(left)}
        print("quit:", results["quit"], flush=True)
        for pid in left:
            os.kill(pid, signal.SIGKILL)

    info = subprocess.run([sys.executable, "-c", "import platform,os;print(platform.processor() or platform.machine(), os.cpu_count())"],
                          capture_output=True, text=True).stdout.strip()
    results["machine"] = info
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    shutil.rmtree(ws, ignore_errors=True)
    ok = (results["idle"]["app_cpu_pct"] < 2 and results["idle"]["app_rss_mb"] < 200
          and results["key_during_run_ms"]["p90"] < 100 and results["save_to_running_ms"]["p90"] < 300
          and results["burst"]["runs"] <= 2 and results["burst"]["final_content_ran"]
          and results["quit"]["leftover_processes"] == 0)
    print("targets met" if ok else "targets NOT met", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
