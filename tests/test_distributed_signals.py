"""Stop signals (evogan.distributed.signals): the first is reported from a thread at once, even
while the main thread is inside a long call that holds off Python's own signal handlers."""

from __future__ import annotations

import hashlib
import os
import signal
import threading

from evogan.distributed.signals import StopFlag, catch_stop_signals, report_stop_signals


def test_the_first_stop_signal_is_reported_while_the_main_thread_is_busy() -> None:
    flag = StopFlag()
    reported: list[tuple[str, bool]] = []
    data = bytes(200_000_000)
    with (
        catch_stop_signals(flag),
        report_stop_signals(lambda name: reported.append((name, flag.raised))),
    ):
        for delay in (0.01, 0.02):
            threading.Timer(delay, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        hashlib.sha256(data).digest()  # C without the GIL for about 0.3 s: no handler runs
    assert flag.signal_name == "SIGUSR1"
    assert reported == [("SIGUSR1", False)]  # before the main thread's handler
