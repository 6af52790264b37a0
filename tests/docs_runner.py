"""A warm interpreter that runs each docs example in a fresh process of its own, forked.

`python -c BLOCK` for each of the docs' 34 Python examples spent most of its CPU importing
the same packages again (0.85 s a block on the 2-core CI machine). This process imports
them once; each block then runs in a child forked from it: its own process (its own exit,
stdout, stderr, working folder and stdin from /dev/null), fresh globals named `__main__`,
exit handlers and non-daemon threads waited for at its end as an interpreter does. Nothing
a block binds comes from here: a block that forgets an import still fails.

Protocol (tests/docs_pages.run_python): one JSON line in, {"code", "cwd", "timeout"}; one
JSON line out, {"rc", "out", "err"}. The parent never starts a thread, so forking is safe.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

PRELOADED = (
    "can",
    "cantools",
    "numpy",
    "hwbridge",
    "hwbridge.can",
    "hwbridge.obd",
    "hwbridge.j1939",
    "hwbridge.serial",
    "hwbridge.mcp",
    "hwbridge.captures",
    "firmware_sim",
    "firmware_sim.j1939",
)


def _child(code: str, cwd: str, out: int, err: int) -> None:
    """In the forked child: run `code` as `python -c` would, then end the process."""
    os.chdir(cwd)
    os.environ["PWD"] = cwd  # as a shell that changed folder says
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the child's own, for its life
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    sys.argv = ["-c"]
    sys.path[0] = ""  # as `python -c`: the working folder first, not this checkout
    status = 0
    try:
        exec(
            compile(code, "<string>", "exec"),
            {"__name__": "__main__", "__builtins__": __builtins__},
        )
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def _run(request: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(request["code"], request["cwd"], out.fileno(), err.fileno())
        deadline = time.monotonic() + float(request["timeout"])
        status = None
        while status is None:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(code)
            elif time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = -signal.SIGKILL
            else:
                time.sleep(0.005)
        out.seek(0)
        err.seek(0)
        return {
            "rc": status,
            "out": out.read().decode(errors="replace"),
            "err": err.read().decode(errors="replace"),
        }


def main() -> None:
    for name in PRELOADED:
        __import__(name)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        request["cwd"] = str(Path(request["cwd"]))
        sys.stdout.write(json.dumps(_run(request)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
