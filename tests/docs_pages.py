"""The one reader of the README and the documentation pages for the tests.

A page is README.md or a Markdown file of docs/. Its code blocks are what the tests run:

- a ```python block runs as written, with the other blocks of its page, in page order, in one
  folder that looks like the repository (its files, and `../shared` when it exists); a block
  directly followed by "prints" and a plain ``` block must print exactly that;
- `<!-- skip: REASON -->` on the line before a block: it is shown, not run (a fragment, or it
  needs hardware or an API key); a python one must still compile;
- `<!-- run -->` on the line before a ```bash block: each of its command lines runs too, in the
  same folder, after the python blocks before it;
- `<!-- produced: NAME -->` on the line before a plain ``` block: a program printed it, and
  tests/docs_produced.py makes it again (tests/test_docs_produced.py compares);
- every `hwbridge ...` line of every ```bash block must parse with the command's own parser.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.shared_data import SHARED

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^(?P=indent)```\s*$", re.S | re.M
)
_MARK = re.compile(r"<!--\s*(?P<kind>skip|run|produced)(?::\s*(?P<reason>.*?))?\s*-->\s*$")
_PRINTS = re.compile(r"\A\s*prints\n\n```\n(?P<out>.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str  # "README.md" or "docs/NAME.md"
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    heading: str  # the nearest heading above it, without its #s
    mark: str | None  # "skip", "run" or "produced" when an HTML comment precedes it
    reason: str | None
    printed: str | None  # the text after `prints`, when the page says exactly what it prints

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def needs_shared(self) -> bool:
        return "../shared" in self.code


def pages() -> list[str]:
    """README.md and every page of docs/, as paths relative to the repository."""
    return ["README.md", *sorted(f"docs/{p.name}" for p in DOCS.glob("*.md"))]


def text(page: str) -> str:
    return (ROOT / page).read_text()


def section(page: str, heading: str) -> str:
    """The text under `heading` (a heading's exact words, any level) up to the next heading of
    the same or a higher level."""
    body = text(page)
    match = re.search(rf"^(#+) {re.escape(heading)}\n", body, re.M)
    assert match is not None, f"{page} has no heading {heading!r}"
    level = len(match.group(1))
    rest = body[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", _without_fences(rest), re.M)
    return rest[: end.start()] if end else rest


def _without_fences(body: str) -> str:
    """`body` with the lines inside code blocks blanked (same length), so that a `#` comment in
    a bash block is never taken for a heading."""
    return _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), body)


def blocks(page: str, language: str | None = None) -> list[Block]:
    """The code blocks of `page` in order, only those in `language` when given."""
    body = text(page)
    plain = _without_fences(body)
    found = []
    for match in _FENCE.finditer(body):
        before = body[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.search(before)
        headings = re.findall(r"^#+ (.*)$", plain[: match.start()], re.M)
        printed = _PRINTS.match(body[match.end() :])
        code = match.group("code")
        if match.group("indent"):
            code = "\n".join(line[len(match.group("indent")) :] for line in code.splitlines())
        found.append(
            Block(
                page=page,
                line=body.count("\n", 0, match.start()) + 1,
                language=match.group("lang"),
                code=code,
                heading=headings[-1] if headings else "",
                mark=mark.group("kind") if mark else None,
                reason=mark.group("reason") if mark else None,
                printed=printed.group("out") if printed else None,
            )
        )
    return [b for b in found if language is None or b.language == language]


def block_under(page: str, heading: str, language: str = "python", index: int = 0) -> Block:
    """The `index`-th block in `language` whose nearest heading is `heading`."""
    under = [b for b in blocks(page, language) if b.heading == heading]
    assert len(under) > index, f"{page}: no {language} block {index} under {heading!r}"
    return under[index]


def printed_after(section_text: str) -> str:
    """The text of the first `prints` block in `section_text`."""
    match = re.search(r"prints\n\n```\n(.*?)```", section_text, re.S)
    assert match is not None, "no prints block"
    return match.group(1)


def repository_folder(folder: Path) -> Path:
    """A folder that looks like the repository to an example: every top-level entry of the
    checkout linked into `folder/repo`, and `folder/shared` linked to ../shared when it is
    there. Examples run in `folder/repo`, so what they write stays out of the checkout."""
    repo = folder / "repo"
    repo.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in {".git", ".venv", "docs"} and not entry.name.endswith("_cache"):
            (repo / entry.name).symlink_to(entry)
    (repo / "docs").symlink_to(DOCS)
    if SHARED.is_dir():
        (folder / "shared").symlink_to(SHARED)
    return repo


def environment(cwd: Path | None = None) -> dict[str, str]:
    """The examples see this checkout's package and simulator, not an installed copy; run in
    `cwd`, PWD says so, as a shell's would (a library that reads PWD, pycapnp under opendbc,
    otherwise warns that it does not match the working folder)."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "firmware-sim")])
    old = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": f"{path}{os.pathsep}{old}" if old else path,
        "COLUMNS": "200",
        **({"PWD": str(cwd)} if cwd is not None else {}),
    }


def run_python(code: str, cwd: Path = ROOT, timeout: float = 90) -> str:
    """Run `code` as `python -c` would, in a process of its own; its stdout. Fails the test
    on a non-zero exit. The process is forked from a warm interpreter (tests/docs_runner.py)
    that has the packages imported already."""
    out = _warm().run(code, cwd, timeout)
    assert out["rc"] == 0, f"exit {out['rc']}\n{out['err'][-3000:]}"
    return str(out["out"])


class _Runner:
    """This test process's warm interpreter (tests/docs_runner.py), started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None

    def run(self, code: str, cwd: Path, timeout: float) -> dict[str, Any]:
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            request = {"code": code, "cwd": str(cwd), "timeout": timeout}
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            answer = process.stdout.readline()
            if not answer:
                self._process = None
                raise AssertionError(f"the docs runner ended: exit {process.wait(10)}")
            result: dict[str, Any] = json.loads(answer)
            return result

    def _started(self) -> subprocess.Popen[str]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.docs_runner"],
            cwd=ROOT,
            env=environment(ROOT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready == "ready\n", f"the docs runner did not start: {ready!r}"
        self._process = process
        atexit.register(_stop, process)
        return process


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(10)


_RUNNER = _Runner()


def _warm() -> _Runner:
    return _RUNNER


def command_lines(code: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comments and blanks dropped."""
    joined = code.replace("\\\n", " ")
    return [
        line.split(" #")[0].strip()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def run_command(line: str, cwd: Path, timeout: float = 90) -> str:
    """Run one command line of a bash block: `hwbridge` and `python` are this interpreter's."""
    words = shlex.split(line)
    if words[0] == "hwbridge":
        words = [sys.executable, "-m", "hwbridge", *words[1:]]
    elif words[0] == "python":
        words = [sys.executable, *words[1:]]
    out = subprocess.run(
        words,
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=environment(cwd),
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, f"{line}: exit {out.returncode}\n{out.stderr[-3000:]}"
    return out.stdout


def hwbridge_words(code: str) -> list[list[str]]:
    """The arguments after `hwbridge` of every hwbridge command in a bash block (also after
    `claude mcp add NAME -- EXECUTABLE`)."""
    found = []
    for line in command_lines(code):
        words = shlex.split(line.replace('"$PWD/', '"'), posix=True)
        if words[0] == "claude":  # claude mcp add NAME [options] -- EXECUTABLE ARGS
            if "--" in words:
                found.append(words[words.index("--") + 2 :])
            continue
        for index, word in enumerate(words):
            if word == "hwbridge" or word.endswith("/hwbridge"):
                found.append(words[index + 1 :])
                break
    return found
