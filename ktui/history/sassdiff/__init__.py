"""What changed in the machine code between two versions of a kernel.

A raw diff of two nvdisasm listings is noise: every address moves, every register gets a new
number, every branch label is renumbered across the whole file. So each function's listing is
normalised first — addresses, encodings, comments, ``.reuse`` flags and the padding after the
last ``EXIT`` dropped; registers (R, UR, P, UP) and labels renumbered by first use — and only
then diffed. Above the diff come the facts a kernel developer looks for: per-opcode count deltas
(``LDG.E.128 +8``, ``HGMMA… +32``) and resource deltas from each version's ``resources.json``.

Works from the files ``ktui run`` leaves in ``.ktui/runs/<kernel>/<version>/``, so it needs no GPU
(the CPU tier compiles ahead of time). No torch or triton imports: the dashboard uses it too.
"""

from ktui.history.sassdiff.align import matching_pairs, unified_diff
from ktui.history.sassdiff.bases import BASES, resolve_base
from ktui.history.sassdiff.diff import SassDiff, diff_listings, diff_versions
from ktui.history.sassdiff.facts import count_opcodes, function_facts, opcode_of
from ktui.history.sassdiff.listing import _Listing, load_version
from ktui.history.sassdiff.model import RESOURCE_KEYS, DiffError, FunctionDiff, MissingSass, NoBase
from ktui.history.sassdiff.normalisation import normalise, shape_key

__all__ = [
    "BASES",
    "RESOURCE_KEYS",
    "DiffError",
    "FunctionDiff",
    "MissingSass",
    "NoBase",
    "SassDiff",
    "_Listing",
    "count_opcodes",
    "diff_listings",
    "diff_versions",
    "function_facts",
    "load_version",
    "matching_pairs",
    "normalise",
    "opcode_of",
    "resolve_base",
    "shape_key",
    "unified_diff",
]
