"""The compiler caches a kernel under test can write are ktui's own: never the user's Triton or
TVM-FFI cache, which the user's next ordinary ``python`` would load from; a strict run's are its own
and gone after it; an unconfined process never uses ktui's (``ktui.worker.confine.caches``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events

from ktui.protocol.processes import NO_CONFINE_ENV
from ktui.worker.confine import landlock_abi

pytestmark = pytest.mark.worker

HACK = "hack_plants_compiler_cache"


def _has_landlock() -> bool:
    try:
        return landlock_abi() >= 1
    except OSError:
        return False


needs_landlock = pytest.mark.skipif(not _has_landlock(), reason="this kernel has no Landlock")


@pytest.fixture
def user(tmp_path):
    """A user of their own: a home folder, a Triton cache they point TRITON_CACHE_DIR at, ktui's folder."""
    home, triton_cache, ktui_dir = tmp_path / "home", tmp_path / "user-triton-cache", tmp_path / "ktui-user"
    for folder in (home, triton_cache):
        folder.mkdir()
    env = {"HOME": str(home), "TRITON_CACHE_DIR": str(triton_cache), "KTUI_USER_DIR": str(ktui_dir),
           NO_CONFINE_ENV: ""}
    return home, triton_cache, ktui_dir, env


def _run(root: Path, env: dict, *flags: str) -> tuple[dict, list[str]]:
    proc = ktui("run", "--no-audit", "--json", "--no-bench", *flags, f"kernels/{HACK}.py", "kernels/add_triton.py",
                cwd=root, env=env)
    kernels = by_kernel(parse_events(proc.stdout))
    assert set(kernels) == {HACK, "add_triton"}, proc.stderr[-3000:]
    printed = [e["text"] for e in kernels[HACK] if e["type"] == "output"]
    return kernels, list(dict.fromkeys(line for line in printed if line.startswith(("planted ", "refused "))))


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


@needs_landlock
def test_a_kernel_cannot_plant_code_in_the_users_compiler_caches_and_ktuis_compiles_land_in_ktuis_own(tmp_path, user):
    home, triton_cache, ktui_dir, env = user
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"], hacks=["plants_compiler_cache"])
    kernels, plants = _run(root, env)
    ktui_triton = ktui_dir / "compilers" / "triton" / "cache"
    assert plants == [f"refused {home / '.triton' / 'cache'}: PermissionError",
                      f"planted {ktui_triton}",  # TRITON_CACHE_DIR, as the kernel sees it: ktui's
                      f"refused {home / '.cache' / 'tvm-ffi'}: PermissionError"], plants
    assert _files(home) == [] and _files(triton_cache) == []  # nothing of the user's was written
    assert all(finished(events)["verdict"] == "passed" for events in kernels.values())
    compiled = [p for p in _files(ktui_triton) if p.name != "ktui_planted.py"]
    assert any(p.suffix == ".ptx" for p in compiled), compiled  # the runs' own compiles, in ktui's cache


@needs_landlock
def test_a_strict_run_compiles_into_caches_of_its_own_that_are_gone_after_it(tmp_path, user):
    home, triton_cache, ktui_dir, env = user
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"], hacks=["plants_compiler_cache"])
    _, plants = _run(root, env, "--strict")
    private = Path(plants[1].removeprefix("planted "))
    assert private.name == "cache" and private.parent.name == "triton" and private.parent.parent.name == "compilers"
    assert not private.is_relative_to(ktui_dir)
    assert not private.exists()  # removed with the strict run's worker
    assert not list(ktui_dir.rglob("ktui_planted.py"))  # no later run meets what it planted
    assert _files(home) == [] and _files(triton_cache) == []


def test_an_unconfined_run_never_uses_ktuis_caches(tmp_path, user):
    _, triton_cache, ktui_dir, env = user
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"], hacks=["plants_compiler_cache"])
    _, plants = _run(root, {**env, NO_CONFINE_ENV: "1"})
    assert f"planted {triton_cache}" in plants  # the user's own choice of cache, as any unconfined python
    assert not (ktui_dir / "compilers").exists()
