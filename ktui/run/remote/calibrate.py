"""``ktui calibrate --remote HOST``: the remote GPU's ceilings, measured there, saved here.

The measurement is ``ktui.measure.calibrate.measure`` run by the remote's Python with the synced
ktui (over the runner's ssh connection); its result comes back as JSON and is saved to the local
``.ktui/calibration.json`` under the remote device's key, and the next remote run sends that file
along, so the benchmark there uses it. A remote without a CUDA GPU is said to be one, by name.
"""

from __future__ import annotations

import json
from pathlib import Path

from ktui.measure.calibrate import Calibration
from ktui.run.remote.runner import RemoteRunner

MEASURE = r"""
import json, sys
from dataclasses import asdict
try:
    import torch
except ImportError as exc:
    print(json.dumps({"error": f"torch cannot be imported there ({exc})"}))
    sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({"no_gpu": True}))
    sys.exit(0)
from ktui.measure import calibrate
result = calibrate.measure(float(sys.argv[1]), lambda text: print(f"measuring {text}", file=sys.stderr, flush=True))
print(json.dumps(asdict(result), default=str))
"""
OVERHEAD_S = 600.0  # importing torch, allocating, the matmuls' first runs


class RemoteCalibrationError(RuntimeError):
    """The remote could not be calibrated: the message names it and says why."""


def measure_remote(runner: RemoteRunner, root: Path, time_s: float) -> Calibration:
    """Measure on ``runner``'s host (RemoteCalibrationError, LinkDown or RuntimeError when it cannot)."""
    base = runner.connect_to(str(Path(root).resolve()))
    done = runner.link.run([*runner.python_command(base), "-c", MEASURE, str(time_s)],
                           timeout=OVERHEAD_S + 40 * time_s, check=False)
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise RemoteCalibrationError(f"calibrating {runner.host} failed: {said[-1] if said else done.returncode}")
    data = json.loads(lines[-1])
    if data.get("no_gpu"):
        raise RemoteCalibrationError(f"calibrate needs a CUDA GPU and there is none on {runner.host} "
                                     "(torch.cuda.is_available() is False there): give --remote a GPU host")
    if data.get("error"):
        raise RemoteCalibrationError(f"{runner.host}: {data['error']}")
    return Calibration(**data)
