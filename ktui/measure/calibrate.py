"""``ktui calibrate``: this device's real ceilings, measured once and cached.

Datasheet peaks are not reachable: a copy reaches ~85-93% of the HBM peak, a matmul ~70-85% of
the tensor-core peak. A kernel "at 80% of roofline" against the datasheet may already be as fast
as the device allows. So ktui measures two ceilings the way a kernel would meet them:

- **memory bandwidth**: the best a streaming kernel reaches over buffers far larger than the L2,
  counting the bytes each really reads and writes: ktui's own Triton kernels for a 1:1 copy, a
  2-read-1-write add and a read-only sum, and torch's ``copy_`` (``ktui.measure.bandwidth``), each
  pattern kept in the details, so that no honest memory-bound kernel reads more than 100% of it;
- **matmul rate** per dtype through torch (cuBLAS): a square product large enough to fill the
  device, ``2·n³ / time``, for fp64, fp32 (TF32 off), tf32, fp16, bf16 and fp8 where supported;
- **launch floor** (``ktui.measure.launchfloor``): the shortest launch to completion, and which
  model of floor and transfer fits copies from tiny to large, stored as ``launch_floor``.

All are timed with the benchmark's own timer (``ktui.worker.timing.calibrate``), always in the
measuring process ``python -m ktui.worker.timing.calibrate``, which is not confined: ``ktui
calibrate`` starts it, and so does the process that started a worker whose first benchmark on a GPU
kind finds none (the worker asks it: ``ASK``; a worker may read the user's calibrations, never
write them, so that no kernel under test can forge the ceilings later verdicts are held to). This
module — the files, the lock, the report, the measuring process's replies — never imports torch or
runs a kernel.

A calibration is kept per user, ``<user_dir>/calibration/<device key>.json``
(``ktui.protocol.statedir.user_calibrations``), so every workspace, and every GPU of the same kind
on the host, uses it; the key is the device's name, its driver (an update can change every
ceiling) and its MIG profile (a slice has a share of the GPU). A workspace's own
``.ktui/calibration.json`` (an object of entries by key, as ``ktui calibrate`` wrote it before
calibrations were shared) still wins where it holds the device's entry. Two processes that need
the same key at once take turns on its lock file (``obtain``): one measures, the other reads
what it kept. The benchmark uses the ceilings in preference to the datasheet, saying so in its
``ceiling`` figure.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ktui.measure import bandwidth as _bandwidth
from ktui.measure import launchfloor as _launchfloor
from ktui.measure.datasheets import lookup
from ktui.measure.roofline import Ceiling
from ktui.protocol.files import write_atomic
from ktui.protocol.statedir import calibration_file, user_calibrations

MATMUL_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
# How long a process waits for another that is measuring the same key (about 15 s on an H200)
# before it goes on without a calibration, its roofline provisional.
LOCK_WAIT_S = 180.0
LOCK_POLL_S = 0.05


class CalibrationError(Exception):
    """The calibration file exists but cannot be used."""


@dataclass
class Calibration:
    device: str
    driver: str
    driver_source: str
    date: str
    torch: str
    bandwidth_gbs: float | None
    tflops: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)  # sizes, samples, errors per measurement
    launch_floor: dict[str, Any] = field(default_factory=dict)  # ``launchfloor.record``; {}: saved before it
    mig: str = ""  # the MIG profile measured ("1g.18gb"); "" for a whole GPU (and every entry saved before it)

    @property
    def key(self) -> str:
        return device_key(self.device, self.driver, self.mig)

    @property
    def identity(self) -> DeviceIdentity:
        return DeviceIdentity(self.device, self.driver, self.mig)

    def ceiling(self) -> Ceiling:
        note = f"calibrated {self.date[:10]}"
        sources = {k: note for k in self.tflops}
        if self.bandwidth_gbs:
            sources["bandwidth"] = note + _bandwidth.source_note(self.details)
        return Ceiling(self.device, self.bandwidth_gbs, dict(self.tflops), sources, _bandwidth.mixes(self.details),
                       _launchfloor.from_record(self.launch_floor, note))


@dataclass(frozen=True)
class DeviceIdentity:
    """What a calibration is kept under: what the device is, not which one of the host it is."""

    device: str
    driver: str
    mig: str = ""  # the MIG profile, "" for a whole GPU

    @property
    def key(self) -> str:
        return device_key(self.device, self.driver, self.mig)

    def words(self) -> str:
        """``NVIDIA H200 (driver 570.124.06)``, ``… MIG 1g.18gb (driver …)``."""
        return f"{self.device}{f' MIG {self.mig}' if self.mig else ''} (driver {self.driver})"


def device_key(device: str, driver: str, mig: str = "") -> str:
    return f"{device} | driver {driver}" + (f" | MIG {mig}" if mig else "")


def path_for(root: Path) -> Path:
    return calibration_file(root)


def user_path(key: str) -> Path:
    """The user's file for one device key: ``<user_dir>/calibration/NVIDIA_H200_driver_570.124.06.json``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("._") or "device"
    return user_calibrations() / f"{stem}.json"


def _read_all(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path} cannot be read ({exc}); run `ktui calibrate` again") from exc
    if not isinstance(data, dict):
        raise CalibrationError(f"{path} does not hold a JSON object; run `ktui calibrate` again")
    return data


def load(root: Path, device: str, driver: str, mig: str = "") -> Calibration | None:
    """The workspace's own calibration of this device, driver and MIG profile, or None if it has none."""
    key = device_key(device, driver, mig)
    entry = _read_all(path_for(root)).get(key)
    if entry is None:
        return None
    try:
        return Calibration(**entry)
    except TypeError as exc:
        raise CalibrationError(f"{path_for(root)}: the entry for {key!r} is malformed ({exc})") from exc


def load_user(identity: DeviceIdentity) -> Calibration | None:
    """The user's calibration of this device kind, or None if there is none."""
    path = user_path(identity.key)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CalibrationError(f"{path} cannot be read ({exc.strerror}); run `ktui calibrate` again") from exc
    try:
        calibration = Calibration(**json.loads(text))
    except (json.JSONDecodeError, TypeError) as exc:
        raise CalibrationError(f"{path} does not hold a calibration ({exc}); run `ktui calibrate` again") from exc
    if calibration.key != identity.key:
        raise CalibrationError(f"{path} holds {calibration.key!r}, not {identity.key!r}; run `ktui calibrate` again")
    return calibration


def save_user(calibration: Calibration) -> Path:
    """Keep a calibration for every workspace of this user (atomically: a reader sees the old file or
    the new one). Callers hold the key's lock (``obtain``)."""
    path = user_path(calibration.key)
    write_atomic(path, json.dumps(asdict(calibration), indent=2, sort_keys=True))
    return path


def newest_for_device(root: Path, device: str) -> Calibration | None:
    """This device's newest calibration whatever its driver or MIG profile (the roofline chart draws
    the GPU's ceilings without knowing which driver the parent runs under), or None: the
    workspace's own file first, as for a run (``find``), else the user's (``user_calibrations``)."""
    found = []
    for key, entry in _read_all(path_for(root)).items():
        if isinstance(entry, dict) and entry.get("device") == device:
            try:
                found.append(Calibration(**entry))
            except TypeError as exc:
                raise CalibrationError(f"{path_for(root)}: the entry for {key!r} is malformed ({exc})") from exc
    if not found:
        found = [cal for cal in _user_calibrations() if cal.device == device]
    return max(found, key=lambda cal: cal.date) if found else None


def _user_calibrations() -> list[Calibration]:
    """Every calibration kept for this user; a file that holds none is passed over (a run that needs
    it says so: ``load_user``)."""
    kept = []
    for path in sorted(user_calibrations().glob("*.json")):
        try:
            kept.append(Calibration(**json.loads(path.read_text())))
        except (OSError, json.JSONDecodeError, TypeError):
            continue
    return kept


def save(root: Path, calibration: Calibration) -> Path:
    """Write (or replace) this device's entry in the workspace's own file, keeping other devices' entries."""

    path = path_for(root)
    try:
        data = _read_all(path)
    except CalibrationError:
        data = {}  # a corrupt file is replaced by a good one
    data[calibration.key] = asdict(calibration)
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True))
    return path


def holds(root: Path, key: str) -> bool:
    """Whether the workspace's own file has an entry for ``key`` (which then wins over the user's)."""
    try:
        return key in _read_all(path_for(root))
    except CalibrationError:
        return False


@dataclass
class Obtained:
    """A device's calibration as a benchmark finds it: where it is kept, or why there is none."""

    calibration: Calibration | None
    path: Path | None = None  # where it is kept; None: none, or measured and not kept
    shared: bool = True  # the user's file (else the workspace's own)
    note: str = ""  # why there is none, or why a file was passed over
    measured_s: float | None = None  # measured by this process, in this long
    waited_s: float = 0.0  # waited this long for another process measuring the same key

    def figures(self) -> dict[str, Any]:
        """The benchmark's figures of it: where it came from, and what it cost this run."""
        out: dict[str, Any] = {}
        if self.calibration is not None and self.path is not None:
            out["calibration"] = str(self.path)
        if self.measured_s is not None:
            out["calibration_s"] = round(self.measured_s, 3)
        if self.waited_s >= 0.01:
            out["calibration_wait_s"] = round(self.waited_s, 3)
        if self.note:
            out["calibration_note"] = self.note
        return out

    def to_json(self) -> dict[str, Any]:
        """Its JSON form, as the measuring process answers a worker's first benchmark (``from_json``)."""
        return {"calibration": asdict(self.calibration) if self.calibration is not None else None,
                "path": str(self.path) if self.path is not None else None, "shared": self.shared, "note": self.note,
                "measured_s": self.measured_s, "waited_s": self.waited_s}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Obtained:
        """What ``to_json`` wrote; a record that holds no calibration reads as none, saying why."""
        note = str(record.get("note") or "")
        calibration = None
        if isinstance(record.get("calibration"), dict):
            try:
                calibration = Calibration(**record["calibration"])
            except TypeError as exc:
                note = _joined(note, f"the measuring process returned a malformed calibration ({exc})")
        measured = record.get("measured_s")
        return cls(calibration, Path(record["path"]) if record.get("path") and calibration is not None else None,
                   shared=bool(record.get("shared", True)), note=note,
                   measured_s=float(measured) if isinstance(measured, (int, float)) else None,
                   waited_s=float(record.get("waited_s") or 0.0))

    def without_launch_floor(self) -> str:
        """Why the roofline has no launch floor, and what to do about it; "" when it has one."""
        cal = self.calibration
        if cal is None:
            return f"no launch floor: this GPU is not calibrated ({self.note or 'no calibration'}); `ktui calibrate` measures it"
        if _launchfloor.from_record(cal.launch_floor, "") is not None:
            return ""
        where = self.path or "its calibration"
        if isinstance(cal.launch_floor, dict) and cal.launch_floor.get("error"):
            return f"no launch floor: its measurement failed ({cal.launch_floor['error']}); `ktui calibrate` measures it again"
        return f"no launch floor: {where} was saved before ktui measured one; `ktui calibrate` measures it again"


def find(root: Path | None, identity: DeviceIdentity) -> Obtained:
    """The workspace's own calibration of the device, else the user's; ``calibration`` None when
    there is neither, ``note`` saying why a file was passed over."""
    notes = []
    if root is not None:
        try:
            own = load(root, identity.device, identity.driver, identity.mig)
            if own is not None:
                return Obtained(own, path_for(root), shared=False)
        except CalibrationError as exc:
            notes.append(f"the workspace's calibration not used: {exc}")
    try:
        mine = load_user(identity)
    except CalibrationError as exc:
        notes.append(str(exc))
        mine = None
    return Obtained(mine, user_path(identity.key) if mine else None, note="; ".join(notes))


Measure = Callable[[Callable[[str], None]], Calibration]  # progress → the device's calibration


def obtain(root: Path | None, identity: DeviceIdentity, measure: Measure, progress: Callable[[str], None],
           again: bool = False, wait_s: float = LOCK_WAIT_S) -> Obtained:
    """The device's calibration (``find``), or, where there is none (or ``again``: ``ktui
    calibrate``), measured once and kept for every workspace of the user.

    The measurement and its write happen under the key's lock file: a process that finds it taken
    says so (``progress``), waits for it, and reads what the other kept instead of measuring too.
    A failed measurement is reported in ``note``, never kept: the next run tries again; so
    is one without a memory bandwidth or a launch floor (one measured under memory pressure), unless
    ``again`` (``ktui calibrate``, asked for by the user, keeps what it measured)."""
    found = Obtained(None) if again else find(root, identity)
    if found.calibration is not None:
        return found
    with _key_lock(identity, wait_s, progress) as turn:
        if not turn.held:
            return Obtained(None, note=_joined(found.note, turn.why), waited_s=turn.waited_s)
        waited_s = turn.waited_s
        if not again:
            kept = find(None, identity)  # kept meanwhile by a process that held the lock before this one
            if kept.calibration is not None:
                return Obtained(kept.calibration, kept.path, note=found.note, waited_s=waited_s)
        path = user_path(identity.key)
        progress(f"measuring {identity.words()} {'again' if again else 'once'}, kept in {path} for every workspace")
        started = time.monotonic()
        try:
            calibration = measure(progress)
        except Exception as exc:  # reported, not kept: the benchmark goes on with a provisional roofline
            why = f"calibrating {identity.words()} failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]
            return Obtained(None, note=_joined(found.note, why), waited_s=waited_s)
        seconds = time.monotonic() - started
        if calibration.key != identity.key:
            why = f"the measurement describes {calibration.key!r}, not {identity.key!r}: not kept"
            return Obtained(calibration, None, note=_joined(found.note, why), measured_s=seconds, waited_s=waited_s)
        missing = incomplete(calibration)
        if missing and not again:
            why = f"measured, not kept: {missing}; the next run measures again (`ktui calibrate` keeps it as it is)"
            return Obtained(calibration, None, note=_joined(found.note, why), measured_s=seconds, waited_s=waited_s)
        try:
            path = save_user(calibration)
        except OSError as exc:
            why = f"measured, not kept: {path} cannot be written ({exc.strerror or exc})"
            return Obtained(calibration, None, note=_joined(found.note, why), measured_s=seconds, waited_s=waited_s)
        return Obtained(calibration, path, note=found.note, measured_s=seconds, waited_s=waited_s)


def incomplete(calibration: Calibration) -> str:
    """What a calibration lacks that a roofline needs (its memory bandwidth, its launch floor); "" when nothing."""
    lacks = []
    if not calibration.bandwidth_gbs:
        lacks.append("no memory bandwidth was measured")
    if _launchfloor.from_record(calibration.launch_floor, "") is None:
        error = calibration.launch_floor.get("error") if isinstance(calibration.launch_floor, dict) else None
        lacks.append(f"the launch floor's measurement failed ({error})" if error else "no launch floor was measured")
    return "; ".join(lacks)


def _joined(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


@dataclass
class _LockTurn:
    held: bool = False
    waited: bool = False  # another process held it first
    waited_s: float = 0.0
    why: str = ""  # why it was not had


@contextmanager
def _key_lock(identity: DeviceIdentity, wait_s: float, progress: Callable[[str], None]) -> Iterator[_LockTurn]:
    """The key's lock file, exclusively, for at most ``wait_s`` of waiting (saying so once);
    released when the block ends (closing the descriptor releases an ``flock``)."""
    path = user_path(identity.key).with_suffix(".lock")
    turn = _LockTurn()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        turn.why = f"the calibration lock {path} cannot be used ({exc.strerror or exc})"
        yield turn
        return
    started = time.monotonic()
    try:
        while not turn.held and not turn.why:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                turn.held = True
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    turn.why = f"the calibration lock {path} cannot be used ({exc.strerror or exc})"
                elif time.monotonic() - started >= wait_s:
                    turn.why = (f"another ktui process has been calibrating {identity.words()} for more than "
                                f"{wait_s:.0f} s")
                else:
                    if not turn.waited:
                        progress(f"waiting for another ktui process calibrating {identity.words()}")
                        turn.waited = True
                    time.sleep(LOCK_POLL_S)
        turn.waited_s = time.monotonic() - started
        yield turn
    finally:
        os.close(fd)


def describe(cal: Calibration) -> list[str]:
    """Human lines: each ceiling, and its share of the datasheet peak where the device is known."""

    spec = lookup(cal.device)
    mig = f" · MIG {cal.mig}" if cal.mig else ""
    lines = [f"{cal.device}{mig} · driver {cal.driver} ({cal.driver_source}) · torch {cal.torch} · {cal.date}"]
    if spec is None:
        lines.append("  (not in the datasheet table: no peak to compare with)")
    lines += _bandwidth.describe(cal.bandwidth_gbs, cal.details, spec.bandwidth_gbs if spec else None)
    for key in MATMUL_DTYPES:
        info = cal.details.get(f"matmul_{key}", {})
        if key in cal.tflops:
            peak = spec.tflops.get(key) if spec else None
            share = f" = {cal.tflops[key] / peak:.0%} of the datasheet {peak:g}" if peak else ""
            lines.append(f"  matmul {key:<5}     {cal.tflops[key]:8.1f} TFLOP/s{share} ({info.get('n')}³, ±{info.get('rse', 0):.2%})")
        elif "error" in info:
            lines.append(f"  matmul {key:<5}     not measured: {info['error']}")
    return lines + _launchfloor.describe(cal.launch_floor)


# A worker's first benchmark on a GPU kind with no calibration asks the process that started it
# (the worker may read the user's calibrations, never write them: ``ktui.worker.confine``). Its ask
# and the answers, besides a run's events, each one JSON line of the worker protocol:
ASK = "calibration_wanted"  # worker → parent, on the worker's stdout: {"type": ASK}
PROGRESS = "calibration_progress"  # parent → worker, on its stdin: {"type": PROGRESS, "text": one step}
ANSWER = "calibration"  # parent → worker, last: {"type": ANSWER, "obtained": Obtained.to_json()}


@dataclass
class Reply:
    """What the measuring process said: its calibration's fields, or why there is none."""

    record: dict[str, Any] | None = None
    kept: str = ""  # where the measuring host keeps it (its user's folder); "" when not kept
    note: str = ""  # why it was not kept, or a file passed over
    error: str = ""
    no_gpu: bool = False
    obtained: dict[str, Any] | None = None  # ``--first``: the benchmark's calibration (``Obtained.to_json``)


def json_objects(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Each line of ``lines`` that is a JSON object; anything else (a stray print) is passed over."""
    for line in lines:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(message, dict):
            yield message


def read_reply(lines: Iterable[str], progress: Callable[[str], None]) -> Reply:
    """Read the measuring process's lines (``ktui.worker.timing.calibrate.main``'s protocol), telling
    its progress as it comes."""
    reply = Reply()
    for message in json_objects(lines):
        if "progress" in message:
            progress(str(message["progress"]))
        elif isinstance(message.get("obtained"), dict):
            reply.obtained = message["obtained"]
        elif isinstance(message.get("calibration"), dict):
            reply.record = message["calibration"]
            reply.kept, reply.note = str(message.get("kept") or ""), str(message.get("note") or "")
        elif "error" in message:
            reply.error, reply.no_gpu = str(message["error"]), bool(message.get("no_gpu"))
    return reply
