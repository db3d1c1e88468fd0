"""What a confined process may touch: the rules of its Landlock ruleset, each a path and its rights.

A kernel under test needs to compute, and to be built and run; so its process may

- **read and execute** what building and running a kernel needs: the system's programs, headers and
  libraries (``/usr``, ``/lib*``, ``/bin``, ``/sbin``, ``/opt/nvidia``), the dynamic loader's files
  and folders (``/etc/ld.so.*`` and the folders they name, ``LD_LIBRARY_PATH``), the Python install
  (its prefixes, site-packages and every ``sys.path`` folder), ``PATH``, the folders the DSLs' and
  CUDA's variables name (``CUDA_HOME``, ``TRITON_PTXAS_PATH``…), the install folder of the host C
  and C++ compilers found on ``PATH`` (nvcc runs them: a gcc in ``/opt/gcc/bin`` reads its headers
  from ``/opt/gcc/lib``) and ktui itself;
- **read** the workspace (every entry of its root but hidden ones and the state folder:
  ``statedir.readable_entries``; of the state folder, its calibration file), the folders it is
  given to read whole (the worker: the user's calibrations, which it never writes), a few files of ``/etc`` (users and groups, the time zone, the
  name service switch; the resolver's and certificates only with ``--allow-network``), ``/proc``
  and ``/sys``, and the device nodes any program uses (``/dev/null``, ``zero``, ``full``,
  ``random``, ``urandom``);
- **write** (and read) only its run folders, its private temp folder, ktui's compiler caches
  (``caches``), ktui's GPU lock folder in ``/dev/shm``, ``/dev/null`` and ``/dev/zero``; on a
  machine with an NVIDIA driver also the GPU's device nodes (``/dev/nvidia*``, ``/dev/dxg``) and
  ``/proc`` (the driver names its threads in ``/proc/<pid>/task/<tid>/comm`` as it starts, opened
  for writing with truncation, a right of its own from Landlock ABI 3: ``cuInit`` fails with 304
  without either), and read ``/run/nvidia-persistenced``.

Nothing else: not the user's home (``~/.ssh``, ``~/.triton``), not ``/etc/shadow``, not ``/tmp``,
not ``.ktui/`` beyond its run folders (the history, the owner's socket and token), not another
workspace. A folder named by the environment (``sys.path``, ``PATH``…) is left out when it holds
the home folder, a workspace or a state folder, or is ``/`` or the system's temp folder: a
``PYTHONPATH=~`` must not open ``~/.ssh``. A path is judged where it leads: a link is followed
when the rule is made, and at each open the kernel checks the file reached.
"""

from __future__ import annotations

import glob
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path
from typing import Iterable

import ktui
from ktui.protocol.dsls import dsls
from ktui.protocol.statedir import RUNS, STATE_DIR, STATE_DIR_ENV, calibration_file, readable_entries
from ktui.worker.confine.landlock import (
    READ,
    READ_DIR,
    READ_EXECUTE,
    READ_FILE,
    TRUNCATE,
    WRITE_FILE,
    Rule,
    handled_rights,
)
from ktui.worker.timing import gpu_lock

SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt/nvidia")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload", "passwd", "group", "nsswitch.conf",
       "localtime", "timezone", "locale.alias", "locale.conf", "os-release", "lsb-release", "mime.types", "inputrc",
       "ssl/openssl.cnf", "nvidia")
ETC_NETWORK = ("resolv.conf", "hosts", "host.conf", "gai.conf", "services", "protocols", "ssl", "pki",
               "ca-certificates", "ca-certificates.conf")
DEVICES_READ = ("/dev/full", "/dev/random", "/dev/urandom")
DEVICES_WRITE = ("/dev/null", "/dev/zero")
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dxg")
GPU_READ = ("/run/nvidia-persistenced", "/usr/lib/wsl")
# Variables whose values name what the DSLs and CUDA run or load: their paths are read and executed.
TOOL_VARIABLES = ("CUDA_", "NVIDIA_", *(prefix for dsl in dsls() for prefix in dsl.variables))
KTUI_TOOLS = ("KTUI_NVDISASM", "KTUI_CUOBJDUMP")
HOST_COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++")  # what nvcc (TileLang's build) calls  # ``measure.tools``' overrides of the tools the dumps run


def has_gpu_driver() -> bool:
    """Whether this machine has an NVIDIA driver's device nodes (or WSL's ``/dev/dxg``)."""
    return bool(glob.glob("/dev/nvidia*")) or os.path.exists("/dev/dxg")


def gpu_nodes_made(run=subprocess.run) -> bool:
    """Make the GPU's device nodes that the driver makes on first use (``/dev/nvidia-uvm`` and its
    tools node, ``/dev/nvidia0``: ``nvidia-modprobe``, as libcuda would), while this process may still
    make them: inside the sandbox ``cuInit`` cannot, and fails with error 304 where a machine's first
    CUDA program is a confined one. True where they exist afterwards."""
    if os.path.exists("/dev/nvidia-uvm"):
        return True
    tool = shutil.which("nvidia-modprobe")
    if tool:
        try:
            run([tool, "-u", "-c=0"], capture_output=True, timeout=20, check=False)
        except (OSError, subprocess.SubprocessError):
            pass
    return os.path.exists("/dev/nvidia-uvm")


def rules(abi: int, writable: Iterable[Path], readable: Iterable[Path], tmp: Path, caches: Iterable[Path],
          system_tmp: Path, network: bool, gpu: bool, shared_memory: bool = False,
          read_only: Iterable[Path] = ()) -> list[Rule]:
    """The ruleset's rules (see the module docstring), in order; folders to write are made first, and
    so are ``read_only``'s, read whole (what is kept in them later is read too, never written).
    ``shared_memory``: all of /dev/shm, for a process a profiler or sanitizer wraps."""
    everything = handled_rights(abi)
    writable, readable = list(writable), list(readable)
    folders = [Path(r) for r in readable if Path(r).is_dir()]
    states = [_state_of(Path(w), folders) for w in writable if Path(w).name == RUNS] + [f / STATE_DIR for f in folders]
    if os.environ.get(STATE_DIR_ENV):
        states.append(Path(os.environ[STATE_DIR_ENV]))
    refused = Refused(states=states, wholes=folders, home=Path.home(), system_tmp=system_tmp)
    own = [*writable, tmp, *caches]
    for folder in own:
        _make(folder)
    out = [Rule(Path(folder), everything) for folder in [*own, _gpu_locks()]]
    if shared_memory:
        out.append(Rule(Path("/dev/shm"), everything))
    out += [Rule(Path(p), READ_EXECUTE) for p in SYSTEM]
    out += [Rule(p, READ_EXECUTE) for p in refused.keep([*python_paths(), *tool_paths(), *compiler_paths(), *loader_paths()])]
    out.append(Rule(Path(ktui.__file__).resolve().parent, READ_EXECUTE))
    out += [Rule(Path("/etc") / name, READ) for name in ETC + (ETC_NETWORK if network else ())]
    out += workspace_rules(readable, states, refused)
    for folder in read_only:
        _make(folder)
        out.append(Rule(Path(folder), READ))
    out += device_rules(gpu)
    out += [Rule(Path("/proc"), READ | (WRITE_FILE | TRUNCATE if gpu else 0)), Rule(Path("/sys"), READ)]
    if gpu:
        mps = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps")
        out += [Rule(Path(p), READ) for p in GPU_READ] + [Rule(mps, READ | WRITE_FILE)]
    return out


def _state_of(runs: Path, workspaces: list[Path]) -> Path:
    """The state folder a ``runs`` folder stands for: the folder holding it (``.ktui``, or a
    ``--state-dir``), but where that folder also holds a workspace read (a remote's base: ``pkg/``,
    ``ws/``, ``runs/``) only ``runs`` itself, or the workspace would be refused whole."""
    holder = _resolved(runs.parent)
    if any(holder == _resolved(w) or holder in _resolved(w).parents for w in workspaces):
        return runs
    return runs.parent


class Refused:
    """Folders named by the environment that are too wide to read: ``/``, the home folder or the
    system's temp folder or anything above them, and whatever holds or lies in a workspace's state."""

    def __init__(self, states: list[Path], wholes: list[Path], home: Path, system_tmp: Path):
        self.states = [_resolved(s) for s in states]
        self.above = [_resolved(p) for p in (*states, *wholes, home, system_tmp)]

    def refuses(self, path: Path) -> bool:
        target = _resolved(path)
        if target == Path("/") or (target / STATE_DIR).is_dir():
            return True
        return any(p == target or target in p.parents for p in self.above) or self.in_state(target)

    def in_state(self, path: Path) -> bool:
        """Whether ``path`` leads into a state folder."""
        target = _resolved(path)
        return any(s == target or s in target.parents for s in self.states)

    def keep(self, paths: Iterable[Path]) -> list[Path]:
        """``paths`` that exist and are not refused, each once."""
        seen: dict[Path, None] = {}
        for path in paths:
            if path.is_absolute() and path.exists() and not self.refuses(path):
                seen.setdefault(_resolved(path))
        return list(seen)


def python_paths() -> list[Path]:
    """The Python install: its prefixes, its site-packages (the user's too) and ``sys.path``."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages(),
             site.getusersitepackages(), *sys.path]
    return [Path(p) for p in paths if p]


def tool_paths() -> list[Path]:
    """``PATH``, and the paths the DSLs' and CUDA's variables and ktui's tool overrides name."""
    values = [os.environ.get("PATH", "")]
    values += [v for k, v in os.environ.items() if k.startswith(TOOL_VARIABLES) or k in KTUI_TOOLS]
    return [Path(p) for value in values for p in value.split(os.pathsep) if p]


def compiler_paths() -> list[Path]:
    """Each host compiler's install folder (``/opt/gcc`` for ``/opt/gcc/bin/gcc``, links followed):
    its headers and helper programs live beside its ``bin``, not on ``PATH``."""
    found = []
    for name in HOST_COMPILERS:
        program = shutil.which(name)
        if program:
            binary = Path(os.path.realpath(program))
            found.append(binary.parent.parent if binary.parent.name == "bin" else binary.parent)
    return found


def loader_paths(conf: Path = Path("/etc/ld.so.conf")) -> list[Path]:
    """The folders the dynamic loader searches: ``LD_LIBRARY_PATH``, and those ``/etc/ld.so.conf``
    names (with its ``include`` files)."""
    found = [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    return found + _conf_folders(conf, set())


def _conf_folders(conf: Path, seen: set[Path]) -> list[Path]:
    if conf in seen:
        return []
    seen.add(conf)
    try:
        lines = conf.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found: list[Path] = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("include"):
            for pattern in line.split()[1:]:
                pattern = pattern if pattern.startswith("/") else str(conf.parent / pattern)
                for included in sorted(glob.glob(pattern)):
                    found += _conf_folders(Path(included), seen)
        elif line.startswith("/"):
            found.append(Path(line))
    return found


def workspace_rules(readable: list[Path], states: list[Path], refused: Refused) -> list[Rule]:
    """A folder to read: listed (so Python finds modules in it), each of its entries that
    ``statedir.readable_entries`` keeps read, where it leads nowhere refused, and its state's
    calibration file (the benchmark rung reads it); a file: read."""
    out = []
    for path in readable:
        if not path.is_dir():
            if not refused.in_state(path):
                out.append(Rule(path, READ_FILE))
            continue
        out.append(Rule(path, READ_DIR))
        out += [Rule(entry, READ) for entry in readable_entries(path, states) if not refused.refuses(entry)]
        out.append(Rule(calibration_file(path), READ_FILE))  # the benchmark's ceilings, in the state folder
    return out


def device_rules(gpu: bool) -> list[Rule]:
    """``/dev`` listed; the devices any program uses; the GPU's nodes where there is a driver."""
    out = [Rule(Path("/dev"), READ_DIR)]
    out += [Rule(Path(p), READ_FILE) for p in DEVICES_READ]
    out += [Rule(Path(p), READ_FILE | WRITE_FILE) for p in DEVICES_WRITE]
    if gpu:
        out += [Rule(Path(p), READ | WRITE_FILE) for pattern in GPU_DEVICES for p in glob.glob(pattern)]
    return out


def _gpu_locks() -> Path:
    """ktui's GPU lock folder in ``/dev/shm`` (``gpu_lock``), made here as every user's ktui shares it."""
    try:
        return gpu_lock.prepare()
    except OSError:
        return gpu_lock.lock_dir()


def _make(folder: Path) -> None:
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # a folder that cannot exist here is one the process cannot write either


def _resolved(path: Path) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return Path(path).absolute()
