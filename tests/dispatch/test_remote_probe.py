"""The first command a remote runs answers with its home and whether it has rsync, and succeeds
either way: a remote without rsync syncs with tar, it is not "unreachable"."""

import subprocess

import pytest

from ktui.dispatch.remote.link import PROBE

pytestmark = pytest.mark.worker


@pytest.mark.parametrize("with_rsync", [True, False])
def test_the_connection_probe_succeeds_with_or_without_rsync_on_the_remote(tmp_path, with_rsync):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if with_rsync:
        (bin_dir / "rsync").write_text("#!/bin/sh\n")
        (bin_dir / "rsync").chmod(0o755)
    done = subprocess.run(["/bin/sh", "-c", PROBE], capture_output=True, text=True,
                          env={"HOME": str(tmp_path), "PATH": str(bin_dir)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(tmp_path), *(["rsync"] if with_rsync else [])]
