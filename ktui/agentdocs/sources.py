"""``ktui context add <source>``: fill ``context/`` with what an agent reads to use the DSLs well.

Each source lands in its own folder, ``context/<source>/``, with a ``SOURCE`` note (origin,
version, date). Offline sources copy what is installed, one per DSL (``ktui.protocol.dsls``: its
package's Python sources and docs, as its row's ``context`` says): ``triton``, ``cutedsl`` (the
``cutlass`` package of nvidia-cutlass-dsl) and ``tilelang`` (without its copy of TVM). Network sources:
``cutlass`` (a shallow, sparse clone of NVIDIA/cutlass limited to the CuTe/CuTeDSL parts),
``triton-tutorials``, and ``ptx`` (the PTX ISA page turned into plain text, one file per
section). Every network step has a timeout, and the URLs can be pointed elsewhere (``--url`` or
the ``KTUI_*`` variables below), which is how the tests run without the network.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable, Iterator

from ktui.protocol.dsls import DslFacts, dsls

TEXT_SUFFIXES = {".py", ".pyi", ".md", ".rst", ".txt", ".h", ".hpp", ".cuh", ".cu", ".cpp", ".c", ".inl",
                 ".yml", ".yaml", ".toml", ".json", ".ptx", ".mlir", ".ipynb"}
# From installed wheels only Python sources and docs: Triton's wheel also carries CUDA/HIP C headers
# (9 MB) that are not Triton and would drown the search.
PACKAGE_SUFFIXES = {".py", ".pyi", ".md", ".rst", ".txt"}
NOTE = "SOURCE"

CUTLASS_GIT = "https://github.com/NVIDIA/cutlass.git"
CUTLASS_PARTS = ["media/docs", "examples/python/CuTeDSL", "python/CuTeDSL", "include/cute"]
TRITON_GIT = "https://github.com/triton-lang/triton.git"
TRITON_TUTORIALS = ["python/tutorials"]
PTX_URL = "https://docs.nvidia.com/cuda/parallel-thread-execution/index.html"
URL_VARIABLES = {"cutlass": "KTUI_CUTLASS_GIT", "triton-tutorials": "KTUI_TRITON_GIT", "ptx": "KTUI_PTX_URL"}

GIT_TIMEOUT_S = 300.0  # a whole sparse clone; a stalled transfer fails sooner (see _git)
HTTP_TIMEOUT_S = 60.0


class ContextError(Exception):
    """A source could not be added; the message says why and what to do."""


@dataclass
class Added:
    source: str
    folder: Path
    files: int
    bytes: int
    version: str
    origin: str
    notes: list[str] = field(default_factory=list)


NETWORK_ADVICE = ("`ktui context add cutlass` (CUTLASS's docs, CuTeDSL examples, CuTe headers), `ktui context add "
                  "ptx` (the PTX ISA, one file per section) or `ktui context add triton-tutorials`, with the network")


# -- the sources ---------------------------------------------------------------------------------
def offline_sources() -> dict[str, str]:
    """Source → the installed package it copies: one per DSL."""
    return {dsl.name: dsl.package for dsl in dsls()}


def installed_offline_sources() -> list[str]:
    """The offline sources whose package is installed here (found, never imported)."""
    import importlib.util

    return [name for name, package in offline_sources().items() if importlib.util.find_spec(package) is not None]


def sources_in(context_dir: Path) -> list[str]:
    """The sources ``ktui context add`` put in ``context_dir`` (each folder with its note)."""
    if not context_dir.is_dir():
        return []
    return sorted(p.name for p in context_dir.iterdir() if p.is_dir() and (p / NOTE).is_file())


def no_match_hint(context_dir: Path, query: str) -> str:
    """What to do when a search finds nothing: never an empty answer without a reason."""
    present = sources_in(context_dir)
    if not present:
        offline = installed_offline_sources()
        first = "".join(f"`ktui context add {s}`, " for s in offline)
        return (f"{context_dir} holds no source yet: add {first + '(offline, from the installed packages), ' if first else ''}"
                f"{NETWORK_ADVICE}")
    missing = [s for s in ("cutlass", "ptx") if s not in present]
    more = (f"; not there yet: {', '.join(missing)} (`ktui context add {missing[0]}`, network)" if missing else "")
    return (f"nothing in {context_dir} ({', '.join(present)}) matches {query!r}: try an identifier or fewer "
            f"words{more}")


def add_source(name: str, context_dir: Path, url: str | None = None, timeout: float | None = None) -> Added:
    offline = {dsl.name: functools.partial(_add_installed, dsl) for dsl in dsls()}
    adders: dict[str, Callable[..., Added]] = {**offline, **NETWORK}
    if name not in adders:
        raise ContextError(f"unknown source {name!r}: choose from {', '.join(adders)} "
                           f"({_and(list(offline))} work offline; the others need the network)")
    context_dir = context_dir.resolve()
    target = context_dir / name
    if target.exists() and not (target / NOTE).is_file():
        raise ContextError(f"{target} exists and was not made by ktui (no {NOTE} note): move it away first")
    if url is None:
        url = os.environ.get(URL_VARIABLES.get(name, ""), None) or None
    context_dir.mkdir(parents=True, exist_ok=True)
    _ignore_index(context_dir)
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=context_dir) as tmp:
        staging = Path(tmp) / name
        staging.mkdir()
        added = adders[name](staging, url=url, timeout=timeout)
        _write_note(staging, added)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # the old copy is replaced only once the new one is complete
    added.folder = target
    return added


def _installed(module: str, distribution: str, name: str, install: str) -> tuple[Path, str]:
    """The folder and version of an installed package, found, never imported (importing a DSL would
    load torch into this, the parent, process)."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ContextError(f"{name} is not installed ({install})")
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return Path(spec.origin).parent, version


def _add_installed(dsl: DslFacts, dest: Path, url: str | None, timeout: float | None) -> Added:
    """A DSL's installed package: its Python sources and docs (its language, and the examples of use
    in its docstrings), less the folders its row leaves out, in ``<dest>/<package>/``."""
    package, version = _installed(dsl.package, dsl.distribution, dsl.title, dsl.install)
    files, size = copy_text_tree(package, dest / dsl.package, PACKAGE_SUFFIXES, leave_out=dsl.context.leave_out)
    licence = _dist_file(dsl.distribution, "LICENSE") if dsl.context.licence else None
    if licence is not None:
        shutil.copy(licence, dest / "LICENSE")
        files += 1
    what = (f"installed Python package {dsl.distribution}" if dsl.distribution == dsl.package
            else f"installed package {dsl.distribution}")
    of = "" if dsl.distribution == dsl.package else f": the {dsl.package} package"
    return Added(dsl.name, dest, files, size, version, f"{what} {version}{of} ({package})",
                 [dsl.context.note] if dsl.context.note else [])


def _and(names: list[str]) -> str:
    """``triton, cutedsl and tilelang``."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _add_cutlass(dest: Path, url: str | None, timeout: float | None) -> Added:
    return _sparse_clone("cutlass", url or CUTLASS_GIT, CUTLASS_PARTS, dest, timeout)


def _add_triton_tutorials(dest: Path, url: str | None, timeout: float | None) -> Added:
    return _sparse_clone("triton-tutorials", url or TRITON_GIT, TRITON_TUTORIALS, dest, timeout)


def _add_ptx(dest: Path, url: str | None, timeout: float | None) -> Added:
    url = url or PTX_URL
    html = fetch_text(url, timeout or HTTP_TIMEOUT_S)
    sections, title = html_sections(html)
    if not sections:
        raise ContextError(f"{url}: no headings found; is this the PTX ISA page?")
    version = ptx_isa_version(title, html)
    files = size = 0
    width = len(str(len(sections)))
    for i, (heading, text) in enumerate(sections, 1):
        name = f"{i:0{width}d}-{_slug(heading)}.txt"
        body = f"{heading}\n{'=' * min(len(heading), 80)}\n\n{text.strip()}\n"
        (dest / name).write_text(body, encoding="utf-8")
        files += 1
        size += len(body)
    return Added("ptx", dest, files, size, f"PTX ISA {version}" if version else "unknown (no ISA version found)",
                 url, [f"{files} sections"])


NETWORK: dict[str, Callable[..., Added]] = {"cutlass": _add_cutlass, "triton-tutorials": _add_triton_tutorials,
                                            "ptx": _add_ptx}


# -- copying and cloning -------------------------------------------------------------------------
def copy_text_tree(src: Path, dest: Path, suffixes: set[str] = TEXT_SUFFIXES,
                   leave_out: tuple[str, ...] = ()) -> tuple[int, int]:
    """Copy the text files under ``src`` (sources, docs, examples) to ``dest``; skip caches and
    binaries, and the top-level folders ``leave_out`` names."""
    files = size = 0
    for path in sorted(_below(src, leave_out)):
        rel = path.relative_to(src)
        if not path.is_file() or path.suffix.lower() not in suffixes:
            continue
        if any(part in ("__pycache__", ".git") for part in rel.parts):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        files += 1
        size += path.stat().st_size
    return files, size


def _below(src: Path, leave_out: tuple[str, ...]) -> Iterator[Path]:
    """Everything under ``src`` but the top-level folders ``leave_out`` names (never walked)."""
    for top in src.iterdir():
        if top.is_dir() and top.name in leave_out:
            continue
        yield top
        if top.is_dir():
            yield from top.rglob("*")


def _dist_file(dist: str, name: str) -> Path | None:
    import importlib.metadata

    try:
        for f in importlib.metadata.distribution(dist).files or []:
            if Path(str(f)).name == name:
                return Path(f.locate())
    except importlib.metadata.PackageNotFoundError:
        return None
    return None


def _git(args: list[str], cwd: Path | None, timeout: float, what: str) -> str:
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",  # never wait for a password
        # A transfer slower than 1 KB/s for 30 s is abandoned instead of hanging.
        "GIT_HTTP_LOW_SPEED_LIMIT": "1000",
        "GIT_HTTP_LOW_SPEED_TIME": "30",
    }
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise ContextError("git is not installed; it is needed to fetch this source") from None
    except subprocess.TimeoutExpired:
        raise ContextError(f"{what}: git gave no result within {timeout:g} s (offline or very slow network?)") from None
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("warning:")]
        detail = lines[-1] if lines else f"git exited {proc.returncode}"
        raise ContextError(f"{what}: {detail}")
    return proc.stdout


def _sparse_clone(name: str, url: str, parts: list[str], dest: Path, timeout: float | None) -> Added:
    """A shallow clone that checks out only ``parts``, copied without its .git."""
    if url.startswith("-"):  # git would read it as an option (--upload-pack runs a command)
        raise ContextError(f"--url {url!r} is not a repository URL")
    limit = timeout or GIT_TIMEOUT_S
    what = f"cannot fetch {name} from {url}"
    with tempfile.TemporaryDirectory(prefix=f"ktui-{name}-") as tmp:
        clone = Path(tmp) / "repo"
        # ``--``: whatever the URL holds, git takes it as the repository, never as an option.
        _git(["clone", "--depth", "1", "--filter=blob:none", "--sparse", "--no-tags", "--", url, str(clone)], None, limit,
             f"{what} (this source needs the network; {_and(list(offline_sources()))} work offline)")
        _git(["sparse-checkout", "set", *parts], clone, limit, what)
        commit = _git(["rev-parse", "HEAD"], clone, 30, what).strip()
        described = _git(["log", "-1", "--format=%cs %s"], clone, 30, what).strip()
        files = size = 0
        missing = []
        for part in parts:
            src = clone / part
            if not src.is_dir():
                missing.append(part)
                continue
            n, s = copy_text_tree(src, dest / part)
            files, size = files + n, size + s
        if files == 0:
            raise ContextError(f"{url}: none of {', '.join(parts)} exists in that repository")
    notes = [f"parts: {', '.join(p for p in parts if p not in missing)}"]
    if missing:
        notes.append(f"absent upstream: {', '.join(missing)}")
    return Added(name, dest, files, size, f"commit {commit[:12]} ({described})", f"{url} (shallow sparse clone)", notes)


def fetch_text(url: str, timeout: float) -> str:
    """Read ``url`` (http(s), file:// or a local path) as text, within ``timeout`` seconds."""
    if "://" not in url:
        path = Path(url)
        if not path.is_file():
            raise ContextError(f"{url}: no such file")
        return path.read_text(encoding="utf-8", errors="replace")
    request = urllib.request.Request(url, headers={"User-Agent": "ktui-context"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = response.read()
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        raise ContextError(f"cannot fetch {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ContextError(f"cannot fetch {url}: {reason} (this source needs the network; {_and(list(offline_sources()))} "
                           "work offline)") from None
    return data.decode(charset, errors="replace")


# -- the PTX ISA page ----------------------------------------------------------------------------
class _SectionText(HTMLParser):
    """Plain text of an HTML page, cut at every h1–h4 heading; navigation, scripts and styles dropped."""

    SKIP = {"script", "style", "nav", "head", "footer"}
    HEADINGS = {"h1", "h2", "h3", "h4"}
    BLOCKS = {"p", "div", "section", "li", "tr", "pre", "br", "table", "dt", "dd", "ul", "ol", "blockquote"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[tuple[str, list[str]]] = []
        self.title: list[str] = []
        self._skip = 0  # depth inside a skipped region (navigation, scripts…)
        self._skip_tag = ""
        self._heading: list[str] | None = None
        self._in_title = False
        self._pre = 0

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self._in_title = True
        if self._skip:
            # Count only the tag that opened the skipped region: unclosed <p>/<li> cannot unbalance it.
            self._skip += tag == self._skip_tag
            return
        if tag in self.SKIP or dict(attrs).get("role") == "navigation":
            self._skip, self._skip_tag = 1, tag
            return
        if tag in self.HEADINGS:
            self._heading = []
        elif tag == "pre":
            self._pre += 1
            self._out("\n")
        elif tag in self.BLOCKS:
            self._out("\n")
        elif tag == "td" or tag == "th":
            self._out(" | ")

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        if self._skip:
            self._skip -= tag == self._skip_tag
            return
        if tag in self.HEADINGS and self._heading is not None:
            heading = re.sub(r"\s+", " ", "".join(self._heading)).strip().rstrip("\uf0c1#¶ ").strip()
            self._heading = None
            if heading:
                self.sections.append((heading, []))
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self._out("\n")
        elif tag in self.BLOCKS:
            self._out("\n")

    def handle_data(self, data):
        if self._in_title:
            self.title.append(data)
        if self._skip:
            return
        if self._heading is not None:
            self._heading.append(data)
            return
        self._out(data if self._pre else re.sub(r"\s+", " ", data))

    def _out(self, text: str) -> None:
        if self.sections:
            self.sections[-1][1].append(text)


def html_sections(html: str) -> tuple[list[tuple[str, str]], str]:
    """``[(heading, plain text)]`` in page order, and the page's title."""
    parser = _SectionText()
    parser.feed(html)
    parser.close()
    sections = []
    for heading, chunks in parser.sections:
        text = re.sub(r"[ \t]+\n", "\n", "".join(chunks))
        text = re.sub(r"\n{3,}", "\n\n", text)
        sections.append((heading, text))
    return sections, "".join(parser.title).strip()


def ptx_isa_version(title: str, html: str) -> str:
    for text in (title, html):
        match = re.search(r"PTX ISA(?: [Vv]ersion)? (\d+\.\d+)", text)
        if match:
            return match.group(1)
    return ""


def _slug(heading: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", heading).strip("-.").lower()
    return slug[:80] or "section"


# -- notes ---------------------------------------------------------------------------------------
def _write_note(folder: Path, added: Added) -> None:
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        f"source: {added.source}",
        f"origin: {added.origin}",
        f"version: {added.version}",
        f"date: {date}",
        f"files: {added.files}",
        *(f"note: {n}" for n in added.notes),
    ]
    (folder / NOTE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_note(folder: Path) -> dict[str, str]:
    note = {}
    for line in (folder / NOTE).read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(": ")
        if key and key != "note":
            note[key] = value
    return note


def _ignore_index(context_dir: Path) -> None:
    """The search index is rebuilt from the files: keep it (and staging folders) out of git."""
    ignore = context_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text(".index.db*\n.*-*/\n")
