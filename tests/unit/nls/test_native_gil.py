"""The nls term counter (nls/_tokenize.c) runs its long stretches without the GIL.

A job worker builds the nls index in a job thread; while a call held the GIL for its whole length, the worker's main
thread could not run its SIGTERM handler nor exit (a build of a big tree makes calls of seconds). Here another
Python thread must keep running during a long call, and the counter refuses a second call while one runs.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import numpy as np

from codewell.nls import _tokenize
from codewell.nls.index import _word_token
from tests.gilcheck import refusals_while, ticks_during

WEIGHTS = (1, 2, 3)  # comment, path and symbol weights
# How long the measured call is made to take (from a first, short call's speed): >= 0.2 s on any machine.
TARGET_SECONDS = 0.4


def source(lines: int, seed: int = 7) -> bytes:
    """C-like lines over a small vocabulary: after the first lines every identifier is known, so that the call is
    the counter's own work (no word_token callback, which takes the GIL for a moment)."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta", "lambda", "zeta"]
    out = []
    for _ in range(lines):
        a, b, c, d = (rng.choice(words) for _ in range(4))
        out.append(f"static int {a}_{b}{c.title()}(int x) {{ return x + {d}; }} // {a} note\n")
    return "".join(out).encode()


def repeats_for(seconds_per_call: float, calls: int) -> int:
    """How many times to repeat what `calls` repetitions did in `seconds_per_call`, for TARGET_SECONDS."""
    return max(calls, min(20_000, int(TARGET_SECONDS / max(seconds_per_call, 1e-6) * calls)))


def long_call(make: Callable[[int], Callable[[], object]], size: int) -> tuple[int, float]:
    """The call `make(size)` run while a thread ticks (ticks_during), `size` doubled until it takes 0.2 s or more
    (on a loaded machine the first, sizing call may have been slow): the ticks during that call and its duration."""
    for _ in range(5):
        ticks, elapsed = ticks_during(make(size))
        if elapsed >= 0.2:
            return ticks, elapsed
        size *= 2
    raise AssertionError(f"calls up to size {size // 2} took under 0.2 s: too short to tell")


def test_add_file_lets_other_threads_run() -> None:
    data = source(4000)  # ~300 KB, one document per range; the ranges cover it again and again
    counter = _tokenize.TermCounter(_word_token)
    start = time.perf_counter()
    counter.add_file(data, [(0, len(data))] * 4, b"mm/slab.c", [b"kmalloc"] * 4, *WEIGHTS)
    counted = [4]

    def add(k: int) -> Callable[[], None]:
        counted.append(k)
        bounds, names = [(0, len(data))] * k, [b"kmalloc"] * k
        return lambda: counter.add_file(data, bounds, b"mm/slab.c", names, *WEIGHTS)

    ticks, elapsed = long_call(add, repeats_for(time.perf_counter() - start, 4))
    assert ticks >= 20, f"{ticks} ticks during a call of {elapsed:.3f} s: the call held the GIL"
    assert counter.sizes()[0] == sum(counted)  # and counted every document


def test_add_source_lets_other_threads_run() -> None:
    sample = source(20_000)  # ~1.5 MB
    counter = _tokenize.TermCounter(_word_token)
    start = time.perf_counter()
    counter.add_source(sample, [], b"a.c", 0, 0, *WEIGHTS)

    def add(repeat: int) -> Callable[[], object]:
        data = sample * min(repeat, 150)  # one file of up to ~230 MB
        return lambda: counter.add_source(data, [(1, 3, "alpha_beta")], b"b.c", 1, 0, *WEIGHTS)

    ticks, elapsed = long_call(add, repeats_for(time.perf_counter() - start, 1))
    assert ticks >= 20, f"{ticks} ticks during a call of {elapsed:.3f} s: the call held the GIL"


def test_a_second_call_while_one_runs_is_refused() -> None:
    # finish_counting from another thread while add_file runs without the GIL would free the tables under it: it is
    # refused, and the running call is not disturbed.
    data = source(4000)
    counter = _tokenize.TermCounter(_word_token)
    start = time.perf_counter()
    counter.add_file(data, [(0, len(data))] * 4, b"p.c", [b""] * 4, *WEIGHTS)
    k = repeats_for(time.perf_counter() - start, 4)
    refused = refusals_while(
        lambda: counter.add_file(data, [(0, len(data))] * k, b"p.c", [b""] * k, *WEIGHTS), counter.finish_counting
    )
    assert refused, "finish_counting was never refused: the running call held the GIL or took no hold on the counter"
    assert "the counter is busy" in refused[0]
    assert counter.sizes()[0] == 4 + k


def test_a_call_without_the_gil_counts_like_calls_with_it() -> None:
    # One add_source over more than a MiB runs without the GIL, taking it back for each new word (word_token) and for
    # lines of only non-ASCII whitespace, and letting it go again a MiB later: the same chunks, terms and counts as
    # add_file over each of its chunks, small calls that keep the GIL.
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"
    lines = []
    for n in range(30_000):
        if n % 97 == 0:
            lines.append("\u3000 \u00a0\n")  # blank for str.strip(): decoded with the GIL
        else:
            fresh = "".join(rng.choice(letters) for _ in range(9))  # a new word: a word_token call
            lines.append(f"int {fresh}_{rng.choice(['alpha', 'beta'])}(void); // calls {fresh}Again\n")
    data = "".join(lines).encode()
    assert len(data) > 1 << 20
    released, held = _tokenize.TermCounter(_word_token), _tokenize.TermCounter(_word_token)
    rows, named = released.add_source(data, [], b"lib/big.c", 3, 0, *WEIGHTS)
    chunks = _tokenize.chunk_file(data, [])
    assert named == []
    assert np.frombuffer(rows, np.int64).reshape(-1, 5).tolist() == [[3, *c[:4]] for c in chunks]
    for _, _, start, end, _ in chunks:
        assert end - start < 1 << 20
        held.add_file(data, [(start, end)], b"lib/big.c", [b""], *WEIGHTS)
    assert released.tokens() == held.tokens()
    exported = []
    for counter in (released, held):
        docs, pairs, _, _ = counter.sizes()
        doc_len, doc_pairs = np.empty(docs, np.int64), np.empty(docs, np.int64)
        terms, counts = np.empty(pairs, np.int32), np.empty(pairs, np.int32)
        counter.export(doc_len, doc_pairs, terms, counts)
        exported.append([a.tolist() for a in (doc_len, doc_pairs, terms, counts)])
    assert exported[0] == exported[1]
