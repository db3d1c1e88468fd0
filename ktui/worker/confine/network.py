"""No network for user code unless the user asks (``--allow-network``): a seccomp filter.

Landlock (ABI 4) denies TCP bind and connect; UDP, raw sockets and the rest of the kernel's socket
families it leaves alone. So a confined process also gets a seccomp filter that lets ``socket(2)``
make Unix sockets only (CUDA's and NVML's links to their daemons use them: nvidia-persistenced,
MPS) and fails any other family with ``EAFNOSUPPORT``; ``io_uring_setup`` fails with ``ENOSYS``
(an io_uring can make sockets without a system call a filter sees); a system call of another
architecture (a 32-bit program, x32) kills the process. ``socketpair`` is untouched: what it makes
is connected to itself. Applied after ``PR_SET_NO_NEW_PRIVS``, inherited by every child.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]'s low word: both are little-endian)

# machine → (AUDIT_ARCH_*, socket's number); io_uring_setup is 425 on both.
ARCHITECTURES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
_IO_URING_SETUP = 425
_X32 = 0x40000000  # x86_64's x32 system calls carry this bit


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter's BPF instructions (code, jump if true, jump if false, k) for ``machine``
    (``platform.machine()``), or None where ktui knows no system call numbers for it."""
    if machine not in ARCHITECTURES:
        return None
    arch, socket_nr = ARCHITECTURES[machine]
    return [
        (_LD_W_ABS, 0, 0, _ARCH),                         # 0
        (_JEQ_K, 1, 0, arch),                             # 1: this architecture → 3
        (_RET_K, 0, 0, _RET_KILL_PROCESS),                # 2: another architecture's system call
        (_LD_W_ABS, 0, 0, _NR),                           # 3
        (_JGE_K, 7, 0, _X32),                             # 4: x32 → 12
        (_JEQ_K, 6, 0, _IO_URING_SETUP),                  # 5: → 12
        (_JEQ_K, 1, 0, socket_nr),                        # 6: socket → 8
        (_RET_K, 0, 0, _RET_ALLOW),                       # 7
        (_LD_W_ABS, 0, 0, _ARG0),                         # 8: socket's family
        (_JEQ_K, 1, 0, socket.AF_UNIX),                   # 9: a Unix socket → 11
        (_RET_K, 0, 0, _RET_ERRNO | errno.EAFNOSUPPORT),  # 10
        (_RET_K, 0, 0, _RET_ALLOW),                       # 11
        (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),        # 12
    ]


def deny_network() -> None:
    """Apply the filter to this thread and what it starts (after ``no_new_privileges``); OSError
    saying why where it cannot be."""
    instructions = program(platform.machine())
    if instructions is None:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {platform.machine()}")
    table = (_Instruction * len(instructions))(*[_Instruction(*i) for i in instructions])
    prog = _Program(len(instructions), table)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.restype = ctypes.c_int
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")
