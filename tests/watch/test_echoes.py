"""A kernel's own saves re-run it a few times in a row at most; a save of the user's runs it again."""

from pathlib import Path

import pytest

from ktui.watch.echoes import LIMIT, Echoes

pytestmark = pytest.mark.unit

ROOT = Path("/ws")
KERNEL = ROOT / "kernels" / "add.py"
REFERENCE = ROOT / "references" / "add.py"


def test_echoes_rerun_a_kernel_limit_times_then_stop_it_saying_why_once():
    echoes = Echoes(ROOT)
    assert [echoes.admit("add", KERNEL, REFERENCE, echo=True) for _ in range(LIMIT)] == [(True, None)] * LIMIT
    rerun, stopped = echoes.admit("add", KERNEL, REFERENCE, echo=True)
    assert not rerun
    assert stopped.kernel == "add" and stopped.path == str(REFERENCE)
    assert stopped.message == (f"kernel add kept rewriting references/add.py during its own runs ({LIMIT} re-runs in "
                               "a row caused by no save of yours): stopped re-running it; save it to run again")
    assert echoes.admit("add", KERNEL, KERNEL, echo=True) == (False, None)  # said once


def test_a_save_of_the_users_reruns_a_stopped_kernel_and_starts_its_count_again():
    echoes = Echoes(ROOT)
    for _ in range(LIMIT + 1):
        echoes.admit("add", KERNEL, KERNEL, echo=True)
    assert echoes.admit("add", KERNEL, KERNEL, echo=False) == (True, None)
    assert [echoes.admit("add", KERNEL, KERNEL, echo=True)[0] for _ in range(LIMIT + 1)] == [True] * LIMIT + [False]


def test_a_rerun_asked_for_starts_the_count_again_and_other_kernels_are_counted_apart():
    echoes = Echoes(ROOT)
    other = ROOT / "kernels" / "other.py"
    for _ in range(LIMIT):
        echoes.admit("add", KERNEL, KERNEL, echo=True)
    assert echoes.admit("other", other, other, echo=True) == (True, None)
    echoes.forget(KERNEL)
    assert [echoes.admit("add", KERNEL, KERNEL, echo=True)[0] for _ in range(LIMIT)] == [True] * LIMIT
