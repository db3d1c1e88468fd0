"""Reading a process's memory cgroup: v1 and v2 trees as the kernel lays them out, the tightest
limit of the cgroup and its ancestors, the page cache it could drop not counted as in use."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktui.protocol.cgroups import V1_UNLIMITED, memory_cgroup

pytestmark = pytest.mark.unit

GB = 10**9


def _tree(tmp_path: Path, version: int, files: dict[str, dict[str, str]]) -> Path:
    """A /proc/self with its cgroup and mountinfo, and the cgroup folders with ``files``."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    mount = tmp_path / "sys fs cgroup"  # a space: mountinfo writes it \\040
    shown = str(mount).replace(" ", "\\040")
    if version == 2:
        (proc / "self" / "cgroup").write_text("0::/user.slice/job\n")
        (proc / "self" / "mountinfo").write_text(f"41 31 0:38 / {shown} rw,relatime - cgroup2 cgroup2 rw\n")
    else:
        (proc / "self" / "cgroup").write_text("5:devices:/\n4:memory:/user.slice/job\n0::/\n")
        (proc / "self" / "mountinfo").write_text(f"35 31 0:32 / {shown} rw,relatime - cgroup cgroup rw,memory\n")
    for folder, contents in files.items():
        (mount / folder).mkdir(parents=True, exist_ok=True)
        for name, text in contents.items():
            (mount / folder / name).write_text(text)
    return proc


def test_v2_the_tightest_limit_binds_and_dropable_cache_is_not_in_use(tmp_path):
    proc = _tree(tmp_path, 2, {
        "": {},
        "user.slice": {"memory.max": str(8 * GB), "memory.current": str(7 * GB), "memory.stat": "inactive_file 0\n"},
        "user.slice/job": {"memory.max": "max", "memory.current": str(GB), "memory.stat": "anon 1\ninactive_file 5\n",
                           "memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n"},
    })
    cgroup = memory_cgroup(proc=proc)
    assert cgroup.version == 2 and cgroup.folder == tmp_path / "sys fs cgroup" / "user.slice" / "job"
    assert cgroup.limit() == 8 * GB and cgroup.headroom() == GB  # the slice's: 8 GB less 7 in use
    assert cgroup.oom_kills() == 2


def test_v1_an_unlimited_cgroup_has_no_headroom_figure_and_a_limited_one_counts_its_cache(tmp_path):
    job = {"memory.limit_in_bytes": str(V1_UNLIMITED + 4096), "memory.usage_in_bytes": str(GB),
           "memory.stat": "cache 9\ntotal_inactive_file 100\n", "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"}
    proc = _tree(tmp_path, 1, {"": {"memory.limit_in_bytes": str(V1_UNLIMITED + 4096)}, "user.slice": {}, "user.slice/job": job})
    cgroup = memory_cgroup(proc=proc)
    assert cgroup.version == 1 and cgroup.limit() is None and cgroup.headroom() is None and cgroup.oom_kills() == 1
    (cgroup.folder / "memory.limit_in_bytes").write_text(str(2 * GB))
    assert cgroup.limit() == 2 * GB and cgroup.headroom() == 2 * GB - (GB - 100)


def test_no_memory_controller_is_no_cgroup(tmp_path):
    proc = _tree(tmp_path, 1, {})
    (proc / "self" / "cgroup").write_text("5:devices:/\n")
    assert memory_cgroup(proc=proc) is None
    assert memory_cgroup(proc=tmp_path / "nowhere") is None


def test_this_process_reads_its_own_cgroup_where_linux_has_one():
    cgroup = memory_cgroup()
    if cgroup is None:
        pytest.skip("no memory cgroup on this machine")
    assert cgroup.folder.is_dir() and cgroup.oom_kills() is not None
