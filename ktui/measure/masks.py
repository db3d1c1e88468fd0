"""Triton loads without a mask, found in the source text, and the hint a CPU-tier failure gets.

On the CPU tier Triton's interpreter does a load by reading the address it is given: a load past
the end of a tensor raises nothing, it returns whatever lies there (wrong values in a correctness
rung) or, far enough out, kills the worker with SIGSEGV. Nothing on the CPU checks bounds, so
when a kernel with unmasked loads fails there, the failure says where those loads are and that
``ktui sanitize`` (compute-sanitizer, on a GPU) checks every access precisely. Text only: the
worker passes the source, and the parent reads the lines back from the compile rung's figures.
"""

from __future__ import annotations

import ast
import textwrap

TRITON_MODULES = ("tl", "language", "triton.language")


def unmasked_load_lines(source: str, first_line: int = 1) -> list[int]:
    """Lines of the ``tl.load`` calls in ``source`` (one function, starting at ``first_line`` of
    its file) that pass neither a mask nor a ``boundary_check``: nothing keeps them in bounds."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return []
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load"):
            continue
        if ast.unparse(node.func.value) not in TRITON_MODULES:
            continue
        keywords = {k.arg for k in node.keywords}
        if len(node.args) < 2 and not keywords & {"mask", "boundary_check"}:
            lines.append(first_line + node.lineno - 1)
    return sorted(lines)


RUNS_THE_KERNEL = ("run", "correctness", "fresh-shapes", "integrity", "dependence")  # the rung families that call it


def with_hint(message: str, rung: str, tier: str, loads: list[str], kernel_path: str) -> str:
    """``message`` of a failed ``rung`` with the out-of-bounds hint on its first line (the line
    one-line views show), where the rung ran the kernel on the CPU tier and it has unmasked loads."""
    if tier != "cpu" or not loads or rung.split("[", 1)[0] not in RUNS_THE_KERNEL:
        return message
    first, newline, rest = message.partition("\n")
    return f"{first}; {out_of_bounds_hint(loads, kernel_path)}{newline}{rest}"


def out_of_bounds_hint(loads: list[str], kernel_path: str) -> str:
    """What a failing rung on the CPU tier adds when its kernel has unmasked loads (``loads``:
    ``"add_kernel at oob_read.py:16"``, as the compile rung records them)."""
    shown = ", ".join(loads[:3]) + (f" and {len(loads) - 3} more" if len(loads) > 3 else "")
    return (f"unmasked tl.load: {shown}; the CPU tier does not check bounds (Triton's interpreter reads whatever "
            f"lies past a tensor), `ktui sanitize {kernel_path}` on a GPU checks out-of-bounds accesses precisely "
            f"(compute-sanitizer)")
