"""Whether a call lets other Python threads run: the check of the native scanners that release the GIL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def ticks_during(call: Callable[[], object]) -> tuple[int, float]:
    """Run `call` in this thread while another thread ticks every half millisecond: the ticks counted while the
    call ran, and its duration. A call that holds the GIL lets the ticker tick at most once or twice."""
    ticks = 0
    stop, started = threading.Event(), threading.Event()

    def tick() -> None:
        nonlocal ticks
        started.set()
        while not stop.is_set():
            ticks += 1
            time.sleep(0.0005)

    ticker = threading.Thread(target=tick)
    ticker.start()
    started.wait()
    try:
        before = ticks
        start = time.perf_counter()
        call()
        elapsed = time.perf_counter() - start
        return ticks - before, elapsed
    finally:
        stop.set()
        ticker.join()


def refusals_while(call: Callable[[], object], other: Callable[[], object]) -> list[str]:
    """Run `call` in another thread and, from this one, try `other` until it is accepted (the call has ended):
    the RuntimeError messages of the tries refused while the call ran. A call that holds the GIL, or takes no hold
    on its object, leaves none."""
    started = threading.Event()

    def run() -> None:
        started.set()
        call()

    worker = threading.Thread(target=run)
    refused: list[str] = []
    worker.start()
    started.wait()
    time.sleep(0.02)  # into the call
    while True:
        try:
            other()
            break  # the call has ended
        except RuntimeError as error:
            refused.append(str(error))
        time.sleep(0.001)
    worker.join()
    return refused
