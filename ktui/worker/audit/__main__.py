"""``python -m ktui.worker.audit``: audits references, one Job JSON line each on stdin.

The worker's contract (``ktui.worker.main``): a ``ready`` line, then per job the events on a
private copy of stdout — ``run_started``, one ``rung_finished`` per check (``reference[…]``,
``mutant[…]``), ``run_finished`` with the verdict ``strong``, ``weak`` or ``error`` — and a
``job_done``; ``audit_step`` lines say what it is doing (the parent's clock for a hang). What user
code prints goes to stderr. A step that outlives ``--timeout`` ends the process (``watchdog``).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import sys
import threading
import time
from typing import Callable

from ktui.protocol import processes
from ktui.protocol.events import ERROR
from ktui.worker.confine import confine, readable_from_env, writable_from_env
from ktui.worker.main import protocol_channel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ktui.worker.audit")
    parser.add_argument("--arch", default=None)
    parser.add_argument("--cpu", action="store_true", help="the CPU tier even where a GPU is present")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one step may take")
    parser.add_argument("--shapes", type=int, default=None, help="audit only the first N test shapes")
    parser.add_argument("--fast", action="store_true", help="only the fast checks (ktui run's first audit)")
    args = parser.parse_args(argv)
    # First of all, before any thread: the reference writes nothing but temp files (``ktui.worker.confine``).
    confinement = confine(writable_from_env(), readable_from_env())
    channel = protocol_channel()
    sys.dont_write_bytecode = True  # the audit writes nothing outside .ktui/, not even a problem's __pycache__
    processes.become_subreaper()
    processes.watch_parent(int(os.environ.get(processes.PARENT_ENV) or 0))
    faulthandler.enable()  # a segfault in user code leaves its stack on stderr, for the parent's message
    lock = threading.Lock()

    def send(obj: dict) -> None:
        with lock:  # the watchdog's thread may report while the main thread writes
            channel.write(json.dumps(obj, allow_nan=False, default=str) + "\n")
            channel.flush()

    import torch

    from ktui.protocol.job import Job
    from ktui.worker.audit.runner import Settings
    from ktui.worker.tier import detect

    tier = detect(args.arch, force_cpu=args.cpu)
    if tier.is_gpu:
        torch.cuda.init()
    send({"type": "ready", "tier": tier.name, "device": tier.device, "arch": tier.arch, "pid": os.getpid(),
          **confinement.to_json()})
    settings = Settings(shapes=args.shapes, fast=args.fast)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = Job.from_json(json.loads(line))
        audit_job(job, tier, settings, args.timeout, send)
        processes.end_descendants()
        send({"type": "job_done", "run_id": job.run_id})
    return 0


def audit_job(job, tier, settings, limit_s: float, send: Callable[[dict], None]) -> None:
    from ktui.protocol.events import FAILED, RunFinished, RungFinished, RunStarted, clean_figures
    from ktui.worker.audit import runner
    from ktui.worker.audit.draws import AuditError
    from ktui.worker.audit.watchdog import Watchdog
    from ktui.worker.context import RunContext
    from ktui.worker.errors import error_info
    from ktui.worker.modules import job_imports

    started = time.perf_counter()
    ctx = RunContext(job=job, tier=tier, emit=lambda event: None)
    send(RunStarted(job.run_id, kernel=job.kernel_id, path=job.reference_path, version=0,
                    content_hash=job.reference_hash, reference=job.reference_path, reference_hash=job.reference_hash,
                    tier=tier.name, device=tier.device, arch=tier.arch, run_dir="").to_json())

    def fail(message: str, error=None) -> None:
        send(RungFinished(job.run_id, rung="audit", status=FAILED, message=message, error=error).to_json())
        send(RunFinished(job.run_id, verdict=ERROR, message=message,
                         summary={"verdict": ERROR, "reasons": [], "error": message},
                         duration_s=round(time.perf_counter() - started, 3)).to_json())

    watchdog = Watchdog(limit_s, lambda: ctx.user_files or {job.reference_path}, fail,
                        lambda what: send({"type": "audit_step", "run_id": job.run_id, "step": what}))
    try:
        with job_imports(job):
            with watchdog.step("loading the reference and choosing its fresh seeds"):
                seeds = runner.load(ctx)
            done = runner.audit(ctx, settings, watchdog.step, seeds)
    except AuditError as exc:
        return fail(exc.message, exc.error)
    except SystemExit as exc:
        return fail(f"the reference called sys.exit({exc.code})")
    except Exception as exc:
        info = error_info(exc, ctx.user_files)
        return fail(f"the audit failed: {info.type}: {info.message}", info)
    for result in done.results:
        send(RungFinished(job.run_id, rung=result.rung, status=result.status, figures=clean_figures(result.figures),
                          message=result.message).to_json())
    verdict = done.verdict
    summary = {**verdict.summary(done.results), "shapes": done.shapes, "fast": settings.fast}
    send(RunFinished(job.run_id, verdict=verdict.verdict, message=(verdict.reasons or [""])[0], summary=summary,
                     duration_s=round(time.perf_counter() - started, 3)).to_json())


if __name__ == "__main__":
    sys.exit(main())
