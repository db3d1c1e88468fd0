"""The table of DSLs: the built-in rows, and another package's row read through its entry point.

A package is installed here as pip would leave it: a ``*.dist-info`` folder with its
``entry_points.txt`` on ``sys.path``, beside its modules.
"""

from __future__ import annotations

import pytest

from ktui.protocol import dsls
from ktui.protocol.dsls import BUILT_IN, DslError

table = dsls.dsls

pytestmark = pytest.mark.unit


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a package named ``name`` whose entry point in ``ktui.dsls`` is ``value``, with ``modules``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    table.cache_clear()

    def install(name: str, value: str, modules: dict[str, str]) -> None:
        info = tmp_path / f"{name}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[{dsls.ENTRY_POINTS}]\n{name} = {value}\n")
        for module, text in modules.items():
            (tmp_path / f"{module}.py").write_text(text)

    yield install
    table.cache_clear()


ROW = """from ktui.protocol.dsls import DslFacts
ROW = DslFacts(name={name!r}, title="Mine", marks="@mine.jit", figure={figure!r}, package="mine",
               distribution="mine", requirement="mine", adapter="mine_ktui.adapter:MINE", runs_on_cpu=True,
               dumps={{"mir": ".mir"}})
"""


def test_the_built_in_dsls_come_first_each_with_its_own_name_figure_and_adapter():
    assert table()[:3] == BUILT_IN
    assert [d.name for d in BUILT_IN] == ["triton", "cutedsl", "tilelang"]
    for key in ("name", "figure", "adapter", "package"):
        assert len({getattr(d, key) for d in BUILT_IN}) == len(BUILT_IN), key


def test_the_install_hint_quotes_what_the_shell_would_expand():
    assert dsls.TRITON.install == "pip install triton"
    assert dsls.TILELANG.install == "pip install 'ktui[tilelang]'"


def test_a_package_adds_a_row_through_its_entry_point(installed):
    installed("mine", "mine_ktui:ROW", {"mine_ktui": ROW.format(name="mine", figure="mine_kernels")})
    assert [d.name for d in table()] == ["triton", "cutedsl", "tilelang", "mine"]
    assert dsls.dump_kinds()["mir"] == ".mir" and ".mir" in dsls.dump_suffixes()
    assert dsls.by_name("mine").title == "Mine"


def test_a_row_that_cannot_be_loaded_names_its_package_and_entry_point(installed):
    installed("broken", "nowhere:ROW", {})
    with pytest.raises(DslError, match=r"the DSL 'broken' \(ktui\.dsls entry point 'nowhere:ROW' of broken 0.1\) "
                                       r"cannot be loaded: ModuleNotFoundError"):
        table()


def test_an_entry_point_that_is_not_a_row_is_refused(installed):
    installed("wrong", "wrong_ktui:ROW", {"wrong_ktui": "ROW = {'name': 'wrong'}\n"})
    with pytest.raises(DslError, match=r"is a dict, not a ktui\.protocol\.dsls\.DslFacts"):
        table()


def test_a_row_may_not_take_the_name_of_a_dsl_already_known(installed):
    installed("impostor", "impostor_ktui:ROW", {"impostor_ktui": ROW.format(name="triton", figure="mine_kernels")})
    with pytest.raises(DslError, match="names itself 'triton' with figure 'mine_kernels', as Triton does"):
        table()


def test_the_dsls_a_cpu_tier_only_compiles_are_read_from_the_kernels_a_run_found():
    assert dsls.compile_only_titles({"triton_kernels": ["k"], "cute_functions": ["f"], "tilelang_kernels": []}) == "CuTeDSL"
    assert dsls.compile_only_titles({"cute_functions": ["f"], "tilelang_kernels": ["t"]}) == "CuTeDSL/TileLang"
    assert dsls.compile_only_titles({"triton_kernels": ["k"]}) == ""


def test_a_file_of_a_dsls_own_is_told_by_its_path():
    assert dsls.TRITON.is_library("/venv/site-packages/triton/language/standard.py")
    assert dsls.CUTEDSL.is_library("/venv/site-packages/nvidia_cutlass_dsl/python_packages/cutlass/cute/core.py")
    assert dsls.TILELANG.is_library("/venv/site-packages/tilelang/src/tl_templates/cuda/gemm.h")
    assert not any(d.is_library("/home/me/ws/kernels/add_triton.py") for d in dsls.BUILT_IN)
