"""ktui's cache of compiler outputs (``ktui.worker.dsl.buildcache``): an entry is read whole or
not at all, a build in progress is waited for rather than repeated, and the least recently used
entries go first."""

from __future__ import annotations

import os
import threading

import pytest

from ktui.worker.dsl.buildcache import BuildCache, key_of

pytestmark = pytest.mark.unit


def test_a_key_is_the_same_for_the_same_inputs_in_any_order_and_differs_for_any_change():
    assert key_of(code="a", arch=["-arch=sm_90a"]) == key_of(arch=["-arch=sm_90a"], code="a")
    assert key_of(code="a", arch=["-arch=sm_90a"]) != key_of(code="a ", arch=["-arch=sm_90a"])
    assert key_of(code="a", arch=["-arch=sm_90a"]) != key_of(code="a", arch=["-arch=sm_100a"])


def test_an_entry_comes_back_as_it_was_put_and_a_second_put_keeps_the_first(tmp_path):
    cache = BuildCache(tmp_path)
    key = key_of(code="kernel")
    assert cache.get(key) is None
    cache.put(key, {"cubin": b"\x7fELF one", "ptx": b".target sm_90a"})
    cache.put(key, {"cubin": b"\x7fELF two"})  # another process's, published later: the first stays
    assert cache.get(key) == {"cubin": b"\x7fELF one", "ptx": b".target sm_90a"}
    assert not any((tmp_path / ".staging").iterdir())  # nothing half-written left behind


def test_an_entry_whose_file_changed_or_went_missing_is_a_miss(tmp_path):
    cache = BuildCache(tmp_path)
    changed, missing = key_of(n=1), key_of(n=2)
    cache.put(changed, {"cubin": b"\x7fELF"})
    cache.put(missing, {"cubin": b"\x7fELF", "ptx": b"ptx"})
    (cache.entry(changed) / "cubin").write_bytes(b"\x7fELG")
    (cache.entry(missing) / "ptx").unlink()
    assert cache.get(changed) is None and cache.get(missing) is None


def test_a_build_in_progress_is_waited_for_and_its_entry_read_instead_of_built_again(tmp_path):
    cache = BuildCache(tmp_path)
    key = key_of(code="slow kernel")
    building = threading.Event()
    finish = threading.Event()
    seen: list = []

    def first_builder() -> None:
        with cache.building(key) as found:
            assert found is None
            building.set()
            finish.wait(30)
            cache.put(key, {"cubin": b"built once"})

    def second_builder() -> None:
        with cache.building(key) as found:  # blocks on the first builder's lock
            seen.append(found)

    one = threading.Thread(target=first_builder)
    one.start()
    assert building.wait(30)
    two = threading.Thread(target=second_builder)
    two.start()
    two.join(0.2)
    assert two.is_alive() and not seen  # still waiting while the first one builds
    finish.set()
    one.join(30)
    two.join(30)
    assert seen == [{"cubin": b"built once"}]


def test_past_its_size_the_cache_drops_the_entries_used_longest_ago(tmp_path):
    cache = BuildCache(tmp_path)
    keys = [key_of(n=n) for n in range(4)]
    for age, key in enumerate(keys):
        cache.put(key, {"cubin": key.encode()})
        os.utime(cache.entry(key), (1_000_000 + age, 1_000_000 + age))
    assert cache.get(keys[0]) is not None  # used now: the newest
    cache.prune(keep=2)
    assert [cache.get(key) is not None for key in keys] == [True, False, False, True]


def test_a_cache_where_nothing_can_be_written_keeps_nothing_and_stops_no_build(tmp_path):
    (tmp_path / "a file").write_text("")
    cache = BuildCache(tmp_path / "a file" / "cache")  # no folder can be made there, even by root
    key = key_of(code="kernel")
    with cache.building(key) as found:
        assert found is None
        cache.put(key, {"cubin": b"\x7fELF"})
    assert cache.get(key) is None
