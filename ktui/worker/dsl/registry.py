"""The DSLs the worker knows, in the order the pre-checks name them: adding one is its module and a line here."""

from __future__ import annotations

from ktui.worker.dsl.base import Dsl
from ktui.worker.dsl.cutedsl import CUTEDSL
from ktui.worker.dsl.tilelang_kernels import TILELANG
from ktui.worker.dsl.triton_kernels import TRITON

DSLS: tuple[Dsl, ...] = (TRITON, CUTEDSL, TILELANG)

