"""Triton loads and stores without a mask, found in the source text, and the hint a CPU-tier
failure gets.

On the CPU tier Triton's interpreter does a load or a store at the address it is given: one past
the end of a tensor raises nothing, it reads whatever lies there (wrong values in a correctness
rung) or writes over it, or, far enough out, kills the worker with SIGSEGV. Nothing on the CPU
checks bounds, so when a kernel with unmasked loads or stores fails there, the failure says where
they are and that ``ktui sanitize`` (compute-sanitizer, on a GPU) checks every access precisely.
Text only: the worker passes the source, and the parent reads the lines back from the compile
rung's figures (``FIGURES``).
"""

from __future__ import annotations

import ast
import textwrap

from ktui.protocol.sourcelines import parse as parse_python

TRITON_MODULES = ("tl", "language", "triton.language")
# The accesses checked, each with the position of its mask among the call's arguments
# (tl.load(pointer, mask, ...), tl.store(pointer, value, mask, ...)).
MASK_POSITION = {"load": 1, "store": 2}
# The compile rung's figure that lists each kind: "add_kernel at oob_read.py:16".
FIGURES = {"load": "unmasked_loads", "store": "unmasked_stores"}


def unmasked_lines(source: str, first_line: int = 1) -> dict[str, list[int]]:
    """Per access (``load``, ``store``), the lines of the ``tl.load``/``tl.store`` calls in
    ``source`` (one function, starting at ``first_line`` of its file) that pass neither a mask nor
    a ``boundary_check``: nothing keeps them in bounds."""
    found: dict[str, list[int]] = {op: [] for op in MASK_POSITION}
    try:
        tree = parse_python(textwrap.dedent(source))
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MASK_POSITION):
            continue
        if ast.unparse(node.func.value) not in TRITON_MODULES:
            continue
        keywords = {k.arg for k in node.keywords}
        if len(node.args) <= MASK_POSITION[node.func.attr] and not keywords & {"mask", "boundary_check"}:
            found[node.func.attr].append(first_line + node.lineno - 1)
    return {op: sorted(lines) for op, lines in found.items()}


def unmasked_of(figures: dict) -> dict[str, list[str]]:
    """The unmasked accesses a compile rung's ``figures`` name, per access (empty lists if none)."""
    return {op: list(figures.get(name) or []) for op, name in FIGURES.items()}


RUNS_THE_KERNEL = ("run", "correctness", "fresh-shapes", "integrity", "dependence")  # the rung families that call it


def with_hint(message: str, rung: str, tier: str, unmasked: dict[str, list[str]], kernel_path: str) -> str:
    """``message`` of a failed ``rung`` with the out-of-bounds hint on its first line (the line
    one-line views show), where the rung ran the kernel on the CPU tier and it has unmasked loads
    or stores (``unmasked``, as ``unmasked_of`` reads them)."""
    if tier != "cpu" or not any(unmasked.values()) or rung.split("[", 1)[0] not in RUNS_THE_KERNEL:
        return message
    first, newline, rest = message.partition("\n")
    return f"{first}; {out_of_bounds_hint(unmasked, kernel_path)}{newline}{rest}"


def out_of_bounds_hint(unmasked: dict[str, list[str]], kernel_path: str) -> str:
    """What a failing rung on the CPU tier adds when its kernel has unmasked accesses (each
    ``"add_kernel at oob_read.py:16"``, as the compile rung records them)."""
    named = [f"unmasked tl.{op}: {_shown(where)}" for op, where in unmasked.items() if where]
    return ("; ".join(named) + "; the CPU tier does not check bounds (Triton's interpreter reads and writes whatever "
            f"lies past a tensor), `ktui sanitize {kernel_path}` on a GPU checks out-of-bounds accesses precisely "
            f"(compute-sanitizer)")


def _shown(where: list[str]) -> str:
    return ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
