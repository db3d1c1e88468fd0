"""The DSLs the worker knows: the adapter of each row of ``ktui.protocol.dsls``, in its order (the
order the pre-checks name them in). Adding one is its adapter module and its row; nothing here."""

from __future__ import annotations

import importlib

from ktui.protocol.dsls import DslFacts, dsls
from ktui.worker.dsl.base import Dsl
from ktui.worker.tier import Tier, detect


def adapter(facts: DslFacts) -> Dsl:
    """The ``Dsl`` that ``facts.adapter`` names (``module:attribute``), checked to be the adapter of that row."""
    module, _, attribute = facts.adapter.partition(":")
    found = getattr(importlib.import_module(module), attribute, None)
    if not isinstance(found, Dsl) or found.facts != facts:
        raise TypeError(f"{facts.adapter} is not the ktui.worker.dsl.base.Dsl of the DSL {facts.name!r} "
                        f"(found {type(found).__name__})")
    return found


DSLS: tuple[Dsl, ...] = tuple(adapter(facts) for facts in dsls())


def for_user_code(arch: str | None = None, force_cpu: bool = False) -> Tier:
    """The tier of a process about to import user code (the worker, a compile-ahead helper, the
    profiler's target): detected, and each DSL configured for its architecture before the user's
    module imports one."""
    tier = detect(arch, force_cpu=force_cpu)
    for dsl in DSLS:
        dsl.configure(tier.arch)
    return tier


def by_name(name: str) -> Dsl:
    """The adapter of the DSL named ``name`` (``CompiledFunction.dsl``)."""
    return next(dsl for dsl in DSLS if dsl.name == name)
