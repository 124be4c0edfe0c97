"""Stop signals (evogan.distributed.signals): the first is reported from a thread at once, even
while the main thread is inside a long call that holds off Python's own signal handlers."""

from __future__ import annotations

import os
import select
import signal
import threading

from evogan.distributed.signals import StopFlag, catch_stop_signals, report_stop_signals


def test_the_first_stop_signal_is_reported_while_the_main_thread_is_busy() -> None:
    """The main thread waits in C until the report is made, as a rank waits inside MPI or a
    long kernel. It blocks the signal, so the kernel interrupts another thread and no wait of
    the main thread returns early to run Python's handler: only a report from another thread
    ends the wait."""
    flag = StopFlag()
    reported: list[tuple[str, bool]] = []
    done, made = os.pipe()

    def record(name: str) -> None:
        reported.append((name, threading.current_thread() is threading.main_thread()))
        os.write(made, b"x")

    try:
        with catch_stop_signals(flag), report_stop_signals(record):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
            try:
                for _ in range(2):
                    os.kill(os.getpid(), signal.SIGUSR1)
                assert select.select([done], [], [], 30)[0], "no report within 30 s"
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    finally:
        os.close(done)
        os.close(made)
    assert flag.signal_name == "SIGUSR1"
    assert reported == [("SIGUSR1", False)]  # once, from the reporting thread
