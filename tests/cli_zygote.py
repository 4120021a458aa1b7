"""The process `tests/cliprocess.py` forks `python -m codewell` processes from (run as a script, never imported).

It imports the CLI and the libraries it uses once, then reads one request per line on the descriptor named by its first
argument (JSON: args, env, cwd, stdout and stderr paths), forks, and answers on the second one with the child's
pid and then its exit status. The child becomes the command: it takes the request's environment, working
directory and standard streams, then runs the `codewell` module as `-m` does (its `__main__` afresh, the
preloaded modules as they are), so the interpreter's own exit handling (exit codes, tracebacks, atexit, thread
joins) applies unchanged.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import runpy
import sys
from typing import Any

REQUESTS, ANSWERS = int(sys.argv[1]), int(sys.argv[2])
# As under `python -m`: the working directory first on the path, not this script's folder (tests/).
sys.path[0] = os.getcwd()


# The expensive part of every start (~3.5 s on a slow machine, far more under load): importing the CLI and every
# library it loads, done once here and shared by every fork. Safe because no codewell module reads the
# environment, the working directory or the terminal when it is imported (rich Consoles are made per command,
# settings are read when a command runs). A failure here is left to the child, which imports what is missing
# again and fails as a real start does.
# `codewell.cli.main` imports its commands only when one runs (codewell.cli.lazy): the web app imports them all.
for module in ("codewell.cli.main", "codewell.app"):
    with contextlib.suppress(BaseException):
        importlib.import_module(module)
# Keep the collector off the imported objects: otherwise each child's collections and exit touch every one of
# them, copying the whole heap page by page (2.1 s instead of 0.7 s per command on a slow machine).
gc.freeze()


def _answer(message: dict[str, Any]) -> None:
    os.write(ANSWERS, (json.dumps(message) + "\n").encode())


def _become(request: dict[str, Any]) -> None:
    """In the child: take the request's environment, directory, streams and argv."""
    # Its own process group, so that a timeout kills whatever the command started too (evaluator workers).
    os.setpgrp()
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # `python -m` puts the starting directory first on sys.path.
    sys.path[0] = os.getcwd()
    stdin = os.open(os.devnull, os.O_RDONLY)
    stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(source, target)
        os.close(source)
    os.close(REQUESTS)
    os.close(ANSWERS)
    sys.argv = ["-m", *request["args"]]


def serve() -> None:
    """Fork one child per request; return only in a child, ready to run the command."""
    # closefd=False: a child closes the descriptor itself, and this object must never close a number the
    # command has reused by then. Buffering cannot read ahead: the next request comes only after the answer.
    requests = os.fdopen(REQUESTS, "rb", closefd=False)
    while line := requests.readline():
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _become(request)
            return
        _answer({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _answer({"returncode": os.waitstatus_to_exitcode(status)})
    sys.exit(0)  # the test process went away


serve()
runpy.run_module("codewell", run_name="__main__", alter_sys=True)
