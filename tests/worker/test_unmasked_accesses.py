"""On the CPU tier an unmasked out-of-range load or store raises nothing: Triton's interpreter reads
or writes what lies there (wrong values) or an unmapped address (SIGSEGV). The failing rung says
where the unmasked loads and stores are and that ``ktui sanitize`` checks bounds precisely on a GPU."""

from __future__ import annotations

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.measure.masks import unmasked_lines


@pytest.mark.worker
def test_a_cpu_failure_of_a_kernel_with_unmasked_loads_points_at_them_and_at_ktui_sanitize(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_triton"], fixtures=["softmax_unmasked", "oob_read_far", "oob_write"])
    proc = ktui("run", "--no-audit", "kernels", "--json", "--seed", "0", cwd=ws)
    kernels = by_kernel(parse_events(proc.stdout))

    wrong = rungs(kernels["softmax_unmasked"])
    assert wrong["compile"]["figures"]["unmasked_loads"] == ["softmax_kernel at softmax_unmasked.py:17"]
    failed = [r for name, r in wrong.items() if name.startswith("correctness[") and r["status"] == "failed"]
    assert failed, "the unmasked load was expected to give wrong values on some shape"
    for r in failed:
        first_line = r["message"].splitlines()[0]
        assert "unmasked tl.load: softmax_kernel at softmax_unmasked.py:17" in first_line
        assert "`ktui sanitize kernels/softmax_unmasked.py` on a GPU" in first_line and "compute-sanitizer" in first_line
    assert "ktui sanitize" in str(finished(kernels["softmax_unmasked"])["summary"]["first_failure"])

    crash = rungs(kernels["oob_read_far"])["run"]
    assert crash["status"] == "crashed" and "SIGSEGV" in crash["message"]
    assert "unmasked tl.load: add_kernel at oob_read_far.py:14" in crash["message"]
    assert "oob_read_far.py:15" not in crash["message"]  # the masked load is not named
    assert "`ktui sanitize kernels/oob_read_far.py` on a GPU" in crash["message"]

    written = rungs(kernels["oob_write"])
    assert written["compile"]["figures"]["unmasked_stores"] == ["add_kernel at oob_write.py:16"]
    assert "unmasked_loads" not in written["compile"]["figures"]  # both its loads are masked
    crash = written["run"]
    assert crash["status"] == "crashed" and "SIGSEGV" in crash["message"]
    first_line = crash["message"].splitlines()[0]
    assert "unmasked tl.store: add_kernel at oob_write.py:16" in first_line and "tl.load" not in first_line
    assert "`ktui sanitize kernels/oob_write.py` on a GPU" in first_line

    shipped = rungs(kernels["softmax_triton"])
    assert "unmasked_loads" not in shipped["compile"]["figures"]  # its load and store are masked
    assert "unmasked_stores" not in shipped["compile"]["figures"]


@pytest.mark.unit
def test_only_loads_and_stores_with_neither_mask_nor_boundary_check_count_as_unmasked():
    source = '''@triton.jit
def k(p, q, n, B: tl.constexpr):
    a = tl.load(p + tl.arange(0, B))
    b = tl.load(p + tl.arange(0, B), tl.arange(0, B) < n)
    c = tl.load(q, boundary_check=(0,))
    d = tl.load(p + 1, mask=n > 0, other=0.0)
    e = cache.load(p)
    tl.store(p + tl.arange(0, B), a)
    tl.store(p + tl.arange(0, B), b, tl.arange(0, B) < n)
    tl.store(q, c, boundary_check=(0,))
    tl.store(p + 1, d, mask=n > 0)
    cache.store(p, e)
'''
    assert unmasked_lines(source, first_line=10) == {"load": [12], "store": [17]}
