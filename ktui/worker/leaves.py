"""Positions inside a problem's inputs: every tensor of a nested tuple, list or dict, where it is,
and how a message names it (``input 0``; GPU MODE's ``data[1]``).

One walk for everyone who looks inside the inputs: a GPU MODE problem's output slots, the audit's
perturbed inputs, the seed guard's comparison of two draws.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

from ktui.protocol.job import GPUMODE

Position = tuple  # a leaf's position inside the inputs: indices and keys from the top


def tree_leaves(obj: Any, path: Position = ()) -> Iterator[tuple[Position, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            yield from tree_leaves(item, (*path, i))
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield from tree_leaves(item, (*path, key))


def leaf_at(obj: Any, path: Position) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def with_leaf(obj: Any, path: Position, value: Any) -> Any:
    """``obj`` with the leaf at ``path`` replaced (containers rebuilt, the rest shared)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, head: with_leaf(obj[head], rest, value)}
    items = list(obj)
    items[head] = with_leaf(items[head], rest, value)
    if isinstance(obj, tuple):
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)  # a namedtuple keeps its type
    return items


def data_path(path: Position) -> str:
    """``(0, 2)`` → ``[2]``: GPU MODE's positions start at the tuple of candidate arguments, ``(data,)``."""
    return "".join(f"[{step!r}]" for step in path[1:])


def leaf_name(problem_format: str, path: Position) -> str:
    """How a message names an input: ``input 0`` (native, KernelBench), ``data[1]`` (GPU MODE)."""
    if problem_format == GPUMODE:
        return "data" + data_path(path)
    head, rest = path[0], path[1:]
    return f"input {head}" + "".join(f"[{step!r}]" for step in rest)


def input_leaves(inputs: tuple, watched: list, problem_format: str) -> list[tuple[Position, str, torch.Tensor]]:
    """The inputs' tensors a candidate must leave as they were (``Problem.watched_inputs``: GPU
    MODE's output slots left out), with their positions and names."""
    kept = {id(t) for t in watched if isinstance(t, torch.Tensor)}
    return [(path, leaf_name(problem_format, path), t) for path, t in tree_leaves(inputs) if id(t) in kept]
