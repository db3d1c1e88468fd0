"""One function's nvdisasm listing made comparable: addresses, encodings, comments, ``.reuse`` flags
and the padding after the last ``EXIT`` dropped; registers and labels renumbered by first use."""

from __future__ import annotations

import re

_ADDRESS = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s*")
_ENCODING = re.compile(r"/\*\s*0x[0-9a-fA-F]+\s*\*/")
_COMMENT = re.compile(r"//.*$")
_REGISTER = re.compile(r"\b(UR|UP|R|P)(\d+)\b")
_REGISTER_NUMBER = re.compile(r"(?:(?<=\b[RP])|(?<=\bU[RP]))\d+\b")  # the digits of a register name
_LABEL_DEF = re.compile(r"^(\.L\w+):$")
_LABEL_REF = re.compile(r"\.L_\w+")
_SYMBOL_DEF = re.compile(r"^[$.\w]+:$")


def normalise(lines: list[str], function: str = "") -> list[str]:
    """One function's nvdisasm lines → comparable lines (see the module docstring)."""
    out: list[str] = []
    registers: dict[str, str] = {}
    per_kind = {"R": 0, "UR": 0, "P": 0, "UP": 0}
    labels: dict[str, str] = {}

    def reg(match: re.Match) -> str:
        key = match.group(0)
        name = registers.get(key)
        if name is None:
            kind = match.group(1)
            name = registers[key] = f"{kind}{per_kind[kind]}"
            per_kind[kind] += 1
        return name

    def label(match: re.Match) -> str:
        return labels.setdefault(match.group(0), f".L{len(labels)}")

    for raw in lines:
        line = _ENCODING.sub("", raw) if "/* 0x" in raw or "/*0x" in raw else raw
        address = _ADDRESS.match(line)
        if address:
            line = line[address.end():]
        if "//" in line:
            line = _COMMENT.sub("", line)
        line = line.strip()
        if not line:
            continue
        if address is None:
            match = _LABEL_DEF.match(line)
            if match:
                out.append(_LABEL_REF.sub(label, line))
            elif _SYMBOL_DEF.match(line) and line[:-1] not in (function, f".text.{function}"):
                out.append(line)  # a named subroutine inside the function: keep it as a label
            continue  # directives (.align, .size…), the function's own symbol
        if line.endswith(";"):
            line = line[:-1].rstrip()
        if ".reuse" in line:
            line = line.replace(".reuse", "")
        if ".L" in line:
            line = _LABEL_REF.sub(label, line)
        line = _REGISTER.sub(reg, line)
        out.append(" ".join(line.split()) if "  " in line else line)
    return _strip_padding(out)


def shape_key(line: str) -> str:
    """A normalised line with register numbers removed: what the diff aligns on, so a version
    whose register allocation shifted (one more register early on renumbers every later one)
    still lines up instruction by instruction."""
    return _REGISTER_NUMBER.sub("", line)


def _strip_padding(lines: list[str]) -> list[str]:
    """Drop what follows the code: the NOP padding, the ``.L: BRA .L`` trap loop, the end label."""
    end = len(lines)

    def is_label(s: str) -> bool:
        return s.endswith(":")

    while end and (lines[end - 1] == "NOP" or is_label(lines[end - 1])):
        end -= 1
    if end >= 2 and is_label(lines[end - 2]) and lines[end - 1] in (f"BRA `({lines[end - 2][:-1]})", f"BRA ({lines[end - 2][:-1]})"):
        end -= 2
        while end and (lines[end - 1] == "NOP" or is_label(lines[end - 1])):
            end -= 1
    return lines[:end]
