"""The binary tools start reliably while another thread changes the environment."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from ktui.measure import sass

pytestmark = pytest.mark.worker


def test_a_tool_starts_while_another_thread_sets_and_unsets_a_variable():
    """The worker's checks toggle ``TRITON_INTERPRET`` while the dumps thread runs the tools.

    With the inherited environment about one start in four failed here with ``[Errno 14] Bad
    address`` (the C library's ``environ`` freed under the forked child).
    """
    true = shutil.which("true")
    if true is None:
        pytest.fail("this test needs the 'true' program on PATH")
    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            os.environ["KTUI_TEST_TOGGLED"] = "1"
            os.environ.pop("KTUI_TEST_TOGGLED", None)

    thread = threading.Thread(target=toggle, daemon=True)
    thread.start()
    try:
        for _ in range(40):
            assert sass._run([true]) == ""
    finally:
        stop.set()
        thread.join()


def test_the_listing_without_line_information_is_what_nvdisasm_prints_without_it():
    """The dumps disassemble once, with ``-g``, and write the plain listing from it: the same text,
    byte for byte, as a second ``nvdisasm -c`` would give (an H200 CUBIN, tests/fixtures/hotspots/h200)."""
    cubin = Path(__file__).parent.parent / "fixtures" / "hotspots" / "h200" / "gemm_bf16_triton.cubin"
    with_lines = sass.disassemble(cubin, line_info=True)
    plain = sass.disassemble(cubin)
    assert with_lines != plain and "//## File" in with_lines
    assert sass.without_line_info(with_lines) == plain
    # and without the dataflow analysis (``-ndf``), as nvdisasm prints with it
    assert plain == sass._run([sass.find_tool("nvdisasm"), "-c", str(cubin)])
