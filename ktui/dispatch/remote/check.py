"""``ktui remote check HOST``: what a remote has for ktui's runs, one line each.

One ssh command runs a short script with the remote's Python: versions come from package
metadata (nothing heavy is imported) — torch's and each DSL's this ktui knows (``ktui.protocol.dsls``),
named in its argument — the GPU from ``nvidia-smi -L``, the tools from PATH.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

import ktui
from ktui.dispatch.remote.link import Link
from ktui.protocol.dsls import dsls

PROBE = r"""
import json, platform, shutil, subprocess, sys
from importlib import metadata
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
gpus = []
if shutil.which("nvidia-smi"):
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        gpus = [line for line in out.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.TimeoutExpired):
        pass
packages = {name: version(distribution) for name, distribution in json.loads(sys.argv[1]).items()}
print(json.dumps({"python": platform.python_version(), "executable": sys.executable, **packages,
    "ktui": version("ktui"), "gpus": gpus, "ncu": shutil.which("ncu"),
    "compute-sanitizer": shutil.which("compute-sanitizer")}))
"""


@dataclass(frozen=True)
class CheckLine:
    name: str
    ok: bool
    text: str

    def __str__(self) -> str:
        return f"{'ok' if self.ok else 'no'}  {self.name:<18} {self.text}"


def probe(link: Link, python: str) -> dict:
    link.connect()
    distributions = {"torch": "torch", **{dsl.name: dsl.distribution for dsl in dsls()}}
    done = link.run([python, "-c", PROBE, json.dumps(distributions)], check=False)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"{python} did not run on {link.address.display}: {said[-1] if said else done.returncode} "
                           "(--remote-python names another interpreter)")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def check_lines(found: dict, host: str, python: str) -> list[CheckLine]:
    install = f"ssh {host} {python} -m pip install"
    lines = [CheckLine("python", True, f"{found['python']} ({found['executable']})")]
    packages = [("torch", "torch", True), *((dsl.name, shlex.quote(dsl.requirement), dsl.required) for dsl in dsls())]
    for name, package, needed in packages:
        version = found.get(name)
        lines.append(CheckLine(name, version is not None or not needed,
                               version or f"not installed (fix: {install} {package})"))
    remote_ktui = found.get("ktui")
    here = ktui.__version__
    if remote_ktui in (None, here):
        text = f"{here} (runs use the copy of this ktui sent with every run)"
    else:
        text = (f"remote has {remote_ktui}, this is {here}: runs use the copy sent with every run, so they match; "
                f"to align the remote's own install: {install} ktui=={here}")
    lines.append(CheckLine("ktui", True, text))
    gpus = found.get("gpus") or []
    lines.append(CheckLine("gpu", bool(gpus), "; ".join(gpus) if gpus else "none (nvidia-smi -L found no GPU): the CPU tier"))
    for tool in ("ncu", "compute-sanitizer"):
        where = found.get(tool)
        lines.append(CheckLine(tool, where is not None, where or "not on PATH (ktui profile / sanitize need it)"))
    return lines


def needed_to_run() -> set[str]:
    """The lines without which no run can start there: Python, torch and the DSLs a worker needs."""
    return {"python", "torch", *(dsl.name for dsl in dsls() if dsl.required)}
