"""ktui's per-user folder: one definition, overridable, never the workspace's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktui.protocol import statedir

pytestmark = pytest.mark.unit


def test_the_user_dir_is_the_override_when_one_is_set(monkeypatch, tmp_path):
    monkeypatch.setenv(statedir.USER_DIR_ENV, str(tmp_path / "mine"))
    assert statedir.user_dir() == tmp_path / "mine"


def test_the_user_dir_follows_xdg_cache_home_when_absolute(monkeypatch, tmp_path):
    monkeypatch.delenv(statedir.USER_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert statedir.user_dir() == tmp_path / "ktui"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: a relative path is ignored
    assert statedir.user_dir() != Path("relative/cache") / "ktui"


def test_the_test_session_never_uses_the_real_users_folder():
    assert statedir.user_dir() != Path.home() / ".cache" / "ktui"
