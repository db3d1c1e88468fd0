"""The DSLs the worker knows, in the order the pre-checks name them: adding one is its module and a line here."""

from __future__ import annotations

from ktui.loop.dsl.base import Dsl
from ktui.loop.dsl.cutedsl import CUTEDSL
from ktui.loop.dsl.tilelang_kernels import TILELANG
from ktui.loop.dsl.triton_kernels import TRITON

DSLS: tuple[Dsl, ...] = (TRITON, CUTEDSL, TILELANG)

