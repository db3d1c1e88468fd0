"""Before the checks: which seeds a run's fresh inputs come from, and whether they keep the meaning
of the problem's own.

``choose`` starts from ``ranges.fresh_range``. Where the problem declares seeds it then makes the
inputs of each case with a declared seed (all but those known to pass ``GUARD_BYTES``; the smallest
at least) from that seed, and from the seeds right after the declared ones until ``MIN_OWN`` draws
describe what the problem's own seeds make (a seed one above keeps a scale the seed sets, and a
problem whose inputs vary by design from seed to seed, as vectorsum's random offset does, needs
more than one draw to show how far they vary). It then makes inputs from seeds of the range for the
same cases and compares their kinds input by input (``kinds``). Where they differ, a widened range
gives way to the declared span, and the span to the declared seeds alone. The run's pre-checks and
the audit say which range was chosen, and why.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ktui.worker import memory
from ktui.worker.leaves import input_leaves
from ktui.worker.outcome import InputGenerationError, shape_label
from ktui.worker.seeds import kinds
from ktui.worker.seeds.ranges import (
    DECLARED_ONLY,
    SPAN,
    WIDE,
    WIDENED,
    SeedRange,
    declared_only,
    declared_span,
    fresh_range,
)

GUARD_BYTES = 64 * 2**20  # a case's inputs compared at most: the guard runs on every run's path
MIN_DRAWS = 3  # fresh draws compared at least: a difference must hold on most of them
MIN_OWN = 8  # draws of the declared seeds (and the next ones) that say what the problem's own inputs are
KEPT = 64  # reference versions whose choice a process keeps

CHOSEN: dict[tuple, Choice] = {}  # (reference path, hash, format, device) → its choice, in this process


@dataclass
class Choice:
    """The range chosen, the cases compared, and what made the guard narrow it."""

    range: SeedRange
    declared_by: str = ""
    compared: list[str] = field(default_factory=list)  # the labels of the cases compared
    rejected: list[tuple[SeedRange, list[str]]] = field(default_factory=list)  # a range given up, and why

    @property
    def declared(self) -> bool:
        """Whether the problem declares seeds (else the fresh ones are drawn as they always were)."""
        return self.range.how != WIDE

    def note(self) -> str:
        """In words: the declared seeds run, where the fresh ones come from and why."""
        if not self.declared:
            return f"fresh seeds from {self.range.text()} (the problem declares none)"
        own = f"{self.declared_by}'s seeds"
        if self.range.how == DECLARED_ONLY:
            where = f"{own} alone ({self.range.text()}): no fresh seed keeps what their inputs are"
        else:
            around = "their span" if self.range.how == SPAN else "around them"
            where = f"{own}, then fresh ones from {self.range.text()} ({around})"
        why = [f"fresh seeds from {given_up.text()} made other inputs ({'; '.join(found[:2])})"
               for given_up, found in self.rejected]
        if not self.compared:
            why.append("not compared with the declared seeds' inputs: making them raised")
        return "; ".join([where, *why])

    def figures(self) -> dict[str, Any]:
        if not self.declared:
            return {}
        return {"fresh_seeds": {**self.range.to_json(), **({"seeds": list(self.range.declared)}
                                                            if self.range.how == DECLARED_ONLY else {})},
                "seed_guard": {"compared": self.compared,
                               "rejected": [{**r.to_json(), "differences": found} for r, found in self.rejected]}}


def choose(ctx: Any) -> Choice:
    """Set ``ctx.fresh_seeds`` for the run (or the audit) and say how it was chosen: once per
    reference version in this process (a warm worker's next run of it compares nothing again)."""
    job = ctx.job
    key = (job.reference_path, job.reference_hash, job.format, ctx.tier.torch_device)
    chosen = CHOSEN.get(key) if job.reference_hash else None
    if chosen is None:
        chosen = _choose(ctx)
        if job.reference_hash:
            if len(CHOSEN) >= KEPT:
                del CHOSEN[next(iter(CHOSEN))]  # the oldest
            CHOSEN[key] = chosen
    ctx.fresh_seeds = chosen.range
    return chosen


def _choose(ctx: Any) -> Choice:
    """The rule, then the guard. Its fresh draws come from a generator of its own, seeded by the
    problem's seeds and its reference version: the same problem always gets the same answer, and
    the run's own draws (``--seed``) are untouched by it."""
    problem = ctx.problem
    declared = problem.declared_seeds
    first = fresh_range(declared)
    choice = Choice(first, problem.declared_by)
    if first.how != WIDE:
        rng = random.Random(f"{sorted(set(declared))} {ctx.job.reference_hash}")
        cases = [(label, shape, seed, _draw(ctx, shape, seed)) for label, shape, seed in _guarded_cases(ctx)]
        cases = [case for case in cases if case[3] is not None]  # its own seed fails: the checks say so
        choice.compared = [label for label, *_ in cases]
        own = [declared for *_, declared in cases] + _next_seeds_draws(ctx, cases)
        candidates = [first, declared_span(declared) if first.how == WIDENED else None]
        choice.range = declared_only(declared)
        for candidate in filter(None, candidates):
            found = _differences(ctx, rng, candidate, cases, own)
            if not found:
                choice.range = candidate
                break
            choice.rejected.append((candidate, found))
    return choice


def _guarded_cases(ctx: Any) -> list[tuple[str, dict, int]]:
    """The cases with a declared seed, but those whose inputs are known to pass ``GUARD_BYTES`` (the
    smallest one at least), as ``(label, shape, seed)``, smallest first: the tests', or the benchmarks'
    where no test declares one. A case that cannot be sized is kept: the checks make its inputs anyway."""
    problem = ctx.problem
    seeded = [(s, seed) for s, seed in zip(problem.tests, problem.test_seeds) if seed is not None] or \
             [(s, seed) for s, seed in zip(problem.benchmarks, problem.benchmark_seeds) if seed is not None]
    sized = []
    for shape, seed in seeded:
        need = memory.estimate(ctx, shape)
        sized.append((need.inputs if need is not None else float("inf"), shape, seed))
    sized.sort(key=lambda item: item[0])
    kept = [(shape, seed) for inputs, shape, seed in sized if inputs <= GUARD_BYTES or inputs == float("inf")]
    return [(shape_label(shape), shape, seed) for shape, seed in kept or [sized[0][1:]]]


def _next_seeds_draws(ctx: Any, cases: list) -> list[dict[str, kinds.Kind]]:
    """Draws of the seeds right after each case's own (seed + 1, + 2, …), until the declared draws
    and these are ``MIN_OWN``: one draw alone does not say how far a problem's inputs vary."""
    found: list[dict[str, kinds.Kind]] = []
    step = 1
    while cases and len(cases) + len(found) < MIN_OWN and step <= MIN_OWN:
        for _, shape, seed, _ in cases[: MIN_OWN - len(cases) - len(found)]:
            drawn = _draw(ctx, shape, seed + step)
            if drawn is not None:
                found.append(drawn)
        step += 1
    return found


def _draw(ctx: Any, shape: dict, seed: int) -> dict[str, kinds.Kind] | None:
    """The kinds of the inputs ``seed`` makes for ``shape``, by input name; None when making them raised."""
    try:
        inputs = ctx.generate(shape, seed)
    except InputGenerationError:
        return None
    return {name: kinds.kind_of(name, t) for _, name, t in input_leaves(inputs, ctx.watched_inputs(inputs),
                                                                        ctx.job.format)}


def _differences(ctx: Any, rng: random.Random, candidate: SeedRange, cases: list,
                 own: list[dict[str, kinds.Kind]]) -> list[str]:
    """How inputs from seeds of ``candidate`` differ in kind from ``own`` (what the problem's own seeds
    make): a form (dtype, shape) that differs from the case's declared draw on any draw, a figure
    outside what every one of ``own`` shows on most of them. ``MIN_DRAWS`` draws at least, cycling
    through the cases, so one unlucky draw decides nothing."""
    envelopes = {name: kinds.Envelope([draw[name] for draw in own if name in draw]) for draw in own for name in draw}
    always: list[str] = []
    tally: dict[str, list[str]] = {}  # a figure of an input → its words on each draw outside the declared ones
    draws = max(len(cases), MIN_DRAWS) if cases else 0
    for i in range(draws):
        label, shape, seed, declared = cases[i % len(cases)]
        fresh_seed = candidate.draw(rng)
        fresh = _draw(ctx, shape, fresh_seed)
        where = f"{label}, seed {fresh_seed}"
        if fresh is None:
            tally.setdefault("raised", []).append(
                f"{where}: {ctx.problem.describe_generate(shape, fresh_seed)} raised, where seed {seed} does not")
            continue
        if fresh.keys() != declared.keys():
            always.append(f"{where}: inputs {', '.join(fresh)}, where seed {seed}'s are {', '.join(declared)}")
            continue
        for name, kind in fresh.items():
            form = kinds.form_difference(declared[name], kind, seed)
            if form:
                always.append(f"{where}: {form}")
                continue
            for figure, words in envelopes[name].outside(kind):
                tally.setdefault(f"{name} {figure}", []).append(f"{where}: {words}")
    mostly = [words[0] + (f" (and on {len(words) - 1} more of {draws} draws)" if len(words) > 1 else "")
              for words in tally.values() if 2 * len(words) > draws]
    return always + mostly
