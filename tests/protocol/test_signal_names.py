"""A signal goes to a remote worker by name (``processes.signal_name``), its number resolved there:
a real-time signal's number depends on the C library (the stack request's are real-time)."""

from __future__ import annotations

import signal

import pytest

from ktui.protocol import processes

pytestmark = pytest.mark.unit


@pytest.mark.skipif(not hasattr(signal, "SIGRTMIN"), reason="no real-time signals here")
def test_the_stack_request_signals_are_real_time_and_named_from_rtmin():
    for signum in (processes.STACK_SIGNAL, processes.STACK_SIGNAL_ASIDE):
        name = processes.signal_name(signum)
        assert name.startswith("RTMIN+") and processes.signal_number(name) == signum
    assert processes.STACK_SIGNAL not in (signal.SIGUSR1, signal.SIGUSR2)


def test_a_plain_signal_keeps_its_name_and_an_unknown_one_is_refused():
    assert processes.signal_name(signal.SIGKILL) == "KILL" and processes.signal_number("KILL") == signal.SIGKILL
    with pytest.raises(ValueError):
        processes.signal_number("NOSUCH")
    with pytest.raises(ValueError):
        processes.signal_number("RTMIN+999")
