"""SigtermFlag: the one SIGTERM-to-flag handler of the checkpoint manager and the framework guards."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from trainguard.runtime.preemption import SigtermFlag


def wait_for(flag: SigtermFlag) -> bool:
    deadline = time.monotonic() + 5
    while not flag.is_set and time.monotonic() < deadline:
        time.sleep(0.01)
    return flag.is_set


def test_a_real_sigterm_sets_the_flag_and_uninstall_puts_back_the_previous_handler():
    seen = []
    before = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    try:
        flag = SigtermFlag()
        flag.install()
        flag.install()  # a second install must not make our own handler "the previous one"
        os.kill(os.getpid(), signal.SIGTERM)
        assert wait_for(flag) and seen == []
        flag.uninstall()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


def test_off_the_main_thread_it_raises_or_with_main_thread_only_does_nothing():
    errors: list[BaseException] = []
    flag = SigtermFlag()
    before = signal.getsignal(signal.SIGTERM)

    def install(**kwargs):
        try:
            flag.install(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    for kwargs in ({}, {"main_thread_only": True}):
        t = threading.Thread(target=install, kwargs=kwargs)
        t.start()
        t.join()
    assert len(errors) == 1 and isinstance(errors[0], ValueError)
    assert signal.getsignal(signal.SIGTERM) == before and not flag.is_set  # nothing installed
    flag.uninstall()  # nothing was installed: nothing to put back, no error


def test_set_acts_as_a_sigterm_without_a_handler():
    flag = SigtermFlag()
    flag.set()
    assert flag.is_set


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
