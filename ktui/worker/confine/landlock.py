"""Landlock through its three system calls: a ruleset of what may be read, written and executed
beneath which paths, no TCP, and no signal or abstract socket reaching out of the sandbox.

Every right the kernel's ABI knows is handled (denied) except those a rule grants, and a rule is
the rights it grants beneath one path (a folder and all it holds, or one file). The ABI sets what
can be denied at all: reads, writes and execution since 1 (5.13); a rename or link across folders
since 2; truncation since 3; TCP bind and connect since 4; the signal and abstract-socket scopes
since 6. Device ioctls (ABI 5) are never handled: CUDA drives the GPU by ioctls on /dev/nvidia*,
and an ioctl changes no file.
"""

from __future__ import annotations

import ctypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # one number on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights (linux/landlock.h).
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: rename or link across folders (Triton's cache renames into place)
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5: named only to say it is left out
# Network rights (ABI 4) and scopes (ABI 6).
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

_ABI1_WRITES = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
                | MAKE_BLOCK | MAKE_SYM)
READ = READ_FILE | READ_DIR
READ_EXECUTE = READ | EXECUTE
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a file (not a folder) may grant
NETWORK_ABI = 4
SCOPES_ABI = 6


def write_rights(abi: int) -> int:
    """The write-type rights a kernel of Landlock ``abi`` knows."""
    rights = _ABI1_WRITES
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def handled_rights(abi: int) -> int:
    """Every filesystem right a kernel of Landlock ``abi`` knows, device ioctls aside: each is
    denied beneath every path no rule names."""
    return write_rights(abi) | READ_EXECUTE


@dataclass(frozen=True)
class Rule:
    """``rights`` beneath ``path`` (a folder and all it holds, or one file)."""

    path: Path
    rights: int


class _RulesetAttr(ctypes.Structure):
    # The kernel reads as much of it as the size passed says: 8 bytes for ABI 1-3, 16 with the
    # network rights (ABI 4), 24 with the scopes (ABI 6).
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def _call(libc, number: int, *args) -> int:
    result = libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; OSError where there is none (old kernel, disabled at boot)."""
    return _call(_libc(), _SYS_CREATE_RULESET, ctypes.c_void_p(None), ctypes.c_size_t(0),
                 ctypes.c_uint32(_CREATE_RULESET_VERSION))


def no_new_privileges() -> None:
    """What Landlock and seccomp need of an unprivileged process: no exec may gain privileges."""
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def restrict(abi: int, rules: list[Rule], network: bool) -> None:
    """Bind this thread, and what it starts from now on, to ``rules``: every handled right is
    denied wherever no rule grants it; no TCP unless ``network`` (ABI 4); no signal or abstract
    Unix socket reaching out of the sandbox (ABI 6). A rule whose path does not exist is left out."""
    libc = _libc()
    handled = handled_rights(abi)
    attr = _RulesetAttr(handled, 0 if network or abi < NETWORK_ABI else NET_BIND_TCP | NET_CONNECT_TCP,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= SCOPES_ABI else 0)
    size = 24 if abi >= SCOPES_ABI else 16 if abi >= NETWORK_ABI else 8
    ruleset = _call(libc, _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for rule in rules:
            _add(libc, ruleset, rule, handled)
        no_new_privileges()
        _call(libc, _SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _add(libc, ruleset: int, rule: Rule, handled: int) -> None:
    try:
        fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist grants nothing
    try:
        rights = rule.rights & handled
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        if rights:
            attr = _PathBeneathAttr(rights, fd)
            _call(libc, _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(attr),
                  ctypes.c_uint32(0))
    finally:
        os.close(fd)
