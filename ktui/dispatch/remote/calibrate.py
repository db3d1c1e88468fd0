"""``ktui calibrate --remote HOST``: the remote GPU's ceilings, measured and kept there.

The measurement is the same process a local ``ktui calibrate`` starts (``python -m
ktui.worker.timing.calibrate``), run by the remote's Python with the synced ktui over the runner's ssh
connection: it keeps the result in the remote user's own folder, where every remote run's benchmark
finds it, and its reply comes back as the same JSON lines. A remote without a CUDA GPU is said to be
one, by name.
"""

from __future__ import annotations

from pathlib import Path

from ktui.dispatch.remote.runner import RemoteRunner
from ktui.measure.calibrate import Reply, read_reply

OVERHEAD_S = 600.0  # importing torch, allocating, the matmuls' first runs


class RemoteCalibrationError(RuntimeError):
    """The remote could not be calibrated: the message names it and says why."""


def measure_remote(runner: RemoteRunner, root: Path, time_s: float) -> Reply:
    """Measure on ``runner``'s host, kept there (RemoteCalibrationError, LinkDown or RuntimeError when it cannot)."""
    base = runner.connect_to(str(Path(root).resolve()))
    done = runner.link.run([*runner.python_command(base), "-m", "ktui.worker.timing.calibrate", "--time", str(time_s)],
                           timeout=OVERHEAD_S + 40 * time_s, check=False)
    reply = read_reply(done.stdout.decode(errors="replace").splitlines(), lambda _: None)
    if reply.no_gpu:
        raise RemoteCalibrationError(f"calibrate needs a CUDA GPU and there is none on {runner.host} "
                                     "(torch.cuda.is_available() is False there): give --remote a GPU host")
    if reply.error:
        raise RemoteCalibrationError(f"{runner.host}: {reply.error}")
    if reply.record is None or done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise RemoteCalibrationError(f"calibrating {runner.host} failed: {said[-1] if said else done.returncode}")
    return reply
