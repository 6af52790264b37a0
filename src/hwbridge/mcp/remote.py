"""McpToolDriver: any MCP server as an MCS tool driver (the remote half of a test farm).

    from hwbridge import Orchestrator
    from hwbridge.mcp import McpToolDriver

    bench1 = McpToolDriver("http://10.0.0.11:8000/mcp", token=TOKEN, label="bench1")
    bench2 = McpToolDriver("http://10.0.0.12:8000/mcp", token=TOKEN, label="bench2")
    farm = Orchestrator([bench1, bench2], names="dotted")   # bench1.read_signals, ...

The server's tools are this driver's (`list_tools`), with their names, descriptions and
input schemas; `execute_tool` calls one over MCP, within `timeout_s` (plus the time the
call's own `timeout_ms`/`duration_ms` asks for). A tool error comes back as a `ToolError`
with the server's code; a server that cannot be reached, or goes away during a call, is
`REMOTE_DOWN` (retryable unless a call that changes state may have run), and the next call
connects again: a restarted bench comes back without restarting anything here.

Trust. The server's annotations are kept (`annotations(name)`), but a remote tool counts
as read-only *here* (no consent asked, run beside other reads, cancelled when abandoned)
only when the caller says so: one of `read_only` names it (`names_tool`), or
`trust_annotations=True` and the server marks it read-only and not destructive. A server
that lies about a tool cannot make a consent gate skip it unless the user trusted that
server, and no server can borrow a name a pattern gave another bench: a pattern with a dot
is `LABEL.NAME`, its label part matched against this driver's own label only. What the
tool does on the bench is still judged by the bench's own SendPolicy.

A tool that cannot be offered is left out and listed in `skipped_tools()`: a name or
schema that cannot be carried (see `remote_tools`), or a name that, as `label.name`, would
be longer than 64 characters. A server's tool never stops the driver or a farm.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shlex
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import orjson
from mcp import StdioServerParameters, types
from mcp.client import InputRequiredRoundsExceededError
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND

from hwbridge.__about__ import __version__
from hwbridge.core.aio import CURRENT_JOB, PROGRESS, ExecutionCancelled, ProgressSink
from hwbridge.core.contract import Capability
from hwbridge.core.health import Health
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, is_tool_name
from hwbridge.core.orchestrator import label_problem
from hwbridge.core.prompts import PromptStrategy
from hwbridge.mcp.questions import MAX_QUESTIONS, QUESTIONS, Questions
from hwbridge.mcp.remote_http import MAX_ANSWER_BYTES, answer_too_large
from hwbridge.mcp.remote_link import InputRequired, RemoteLink, Target, describe
from hwbridge.mcp.remote_listing import Listed
from hwbridge.mcp.remote_tools import (
    MAX_CATALOGUE_BYTES,
    MAX_TOOLS,
    RemoteAnnotations,
    down_while_calling,
    error_of,
    past_catalogue,
    result_of,
    size_of,
    timed_out,
    too_large,
    tool_of,
)
from hwbridge.mcp.resources import HEALTH_URI

__all__ = ["McpToolDriver", "names_tool"]

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
HEALTH_TIMEOUT_S = 5.0
_DURATION_ARGUMENTS = ("timeout_ms", "duration_ms")
_TOOL_LEVEL = frozenset({INVALID_PARAMS, METHOD_NOT_FOUND})
"""MCP error codes about the call itself; any other leaves the connection in doubt."""


class McpToolDriver(HybridDriver):
    """An MCP server (streamable HTTP with a bearer token, or a stdio command) as a tool
    driver; wrapped by nothing else, it is LLM-ready like any HybridDriver.

    `url_or_command`: `http(s)://HOST:PORT/mcp`, or a command (a string split like a shell
    line, or a list of words) started over stdio. `token`: the bearer token (HTTP only).
    `label`: the name of this server in an Orchestrator (`bench1`). The connection is made
    here (REMOTE_DOWN ToolError if the server does not answer within `connect_timeout_s`);
    `close()` ends it.
    """

    meta = DriverMeta(
        id="3f9d6c2a-7b41-4e85-a0d3-5c8e1f2b6a74",
        name="MCP server",
        version=__version__,
        bindings=[DriverBinding(capability="mcp-tools", adapter="mcp", spec_format="MCP")],
        capabilities=[Capability.HEALTHCHECK.value],
    )

    def __init__(
        self,
        url_or_command: str | Sequence[str],
        token: str | None = None,
        label: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_only: Iterable[str] = (),
        trust_annotations: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
    ) -> None:
        super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
        if not (timeout_s > 0 and connect_timeout_s > 0):
            raise ValueError("timeout_s and connect_timeout_s must be above 0")
        problem = label_problem(label) if label is not None else None
        if problem is not None:
            raise ValueError(problem)
        self.target = _target(url_or_command, token, env, cwd)
        self.label = label
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.read_only_patterns = tuple(read_only)
        self.trust_annotations = trust_annotations
        self._tools: dict[str, Tool] = {}
        self._hints: dict[str, RemoteAnnotations] = {}
        self._skipped: dict[str, str] = {}
        self._unread = 0  # tools past MAX_TOOLS in the last listing, not read
        self._taking = threading.Lock()
        transport = "mcp-streamable-http" if self.target.url is not None else "mcp-stdio"
        self.meta = type(self).meta.model_copy(
            update={
                "name": f"MCP server {label or self.target.shown}"[:120],
                "bindings": [
                    DriverBinding(capability="mcp-tools", adapter=transport, spec_format="MCP")
                ],
            }
        )
        self._link = RemoteLink(
            self.target,
            name=label or self.target.shown[:40],
            where=self.where,
            connect_timeout_s=self.connect_timeout_s,
            on_tools=self._take_tools,
        )
        try:
            self._link.run(self._link.client(), 2 * self.connect_timeout_s + 5)
        except TimeoutError:
            self._link.close()
            raise ToolError(
                "REMOTE_DOWN",
                f"{self.where} does not answer (no answer within {self.connect_timeout_s:g} s)",
                retryable=True,
            ) from None
        except BaseException:
            self._link.close()
            raise
        self._link.hand_over()  # the first listing, here and now

    # -- the server's tools --------------------------------------------------------------

    @property
    def where(self) -> str:
        """How messages name the server: its label and URL or command (never the token)."""
        shown = self.target.shown
        return f"{self.label} ({shown})" if self.label else shown

    def _take_tools(self, listing: Listed) -> None:
        """Make the tools of a listing this driver's (the link hands over one listing at a
        time, the newest): at most MAX_CATALOGUE_BYTES of them, the rest skipped."""
        with self._taking:
            self._take(listing)

    def _take(self, listing: Listed) -> None:
        tools: dict[str, Tool] = {}
        hints: dict[str, RemoteAnnotations] = {}
        skipped: dict[str, str] = dict(listing.skipped)
        room = MAX_CATALOGUE_BYTES
        for listed in listing.tools:
            if room <= 0:
                skipped[str(listed.name)[:80]] = past_catalogue()
                continue
            read_only = self._counts_as_read_only(listed)
            made = tool_of(
                listed, read_only=read_only, trust_hints=self.trust_annotations, room=room
            )
            if isinstance(made, str):
                skipped[str(listed.name)[:80]] = made
                continue
            if made.name in tools:
                skipped[made.name] = "the server lists it twice"
                continue
            if self.label and not is_tool_name(f"{self.label}.{made.name}"):
                skipped[made.name] = (
                    f"as {self.label}.{made.name} its name would be longer than 64 characters"
                )
                continue
            tools[made.name] = made
            hints[made.name] = RemoteAnnotations.of(listed)
            room -= size_of(made.parameters, made.description)
        self._unread = listing.unread
        if tools == self._tools and skipped == self._skipped:
            return
        self._tools, self._hints, self._skipped = tools, hints, skipped
        self.tools_changed()

    def _counts_as_read_only(self, remote: types.Tool) -> bool:
        if any(names_tool(p, self.label, remote.name) for p in self.read_only_patterns):
            return True
        hints = RemoteAnnotations.of(remote)
        return self.trust_annotations and hints.read_only is True and hints.destructive is not True

    def list_tools(self) -> list[Tool]:
        return list(self._tools.values())

    def annotations(self, tool_name: str) -> dict[str, bool]:
        """What the server said about a tool (readOnlyHint, destructiveHint, ...), as it said
        it: kept whether or not it is trusted here."""
        hints = self._hints.get(tool_name)
        return hints.as_dict() if hints is not None else {}

    def skipped_tools(self) -> dict[str, str]:
        """The server's tools that are not offered, and why (a name or schema that cannot be
        carried, a duplicate, past the bytes all of them may take)."""
        return dict(self._skipped)

    def refresh_tools(self) -> None:
        """List the server's tools again now (a change notification or a new connection does
        this by itself). A listing that does not end within `connect_timeout_s` is
        REMOTE_TIMEOUT, one that fails REMOTE_ERROR (the tools stay as they were)."""
        try:
            # after the listing in flight, if any: each within connect_timeout_s
            self._link.run(self._link.refresh_tools(), 2 * self.connect_timeout_s + 5)
        except TimeoutError:
            raise ToolError(
                "REMOTE_TIMEOUT",
                f"{self.where} did not list its tools within {self.connect_timeout_s:g} s",
                retryable=True,
            ) from None
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(
                "REMOTE_ERROR",
                f"the tools of {self.where} could not be listed again: {describe(exc)}",
                retryable=True,
            ) from None

    # -- calls -------------------------------------------------------------------------

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        tool = self._tools.get(tool_name)
        if tool is None:
            raise ToolError("UNKNOWN_TOOL", f"{self.where} no longer offers {tool_name[:80]}")
        changes_state = not tool.read_only
        limit = self._limit(arguments)
        sink = PROGRESS.get()
        questions = QUESTIONS.get() if changes_state else None
        future = self._link.submit(
            self._call(
                tool_name, arguments, limit, _progress(sink), changes_state, questions=questions
            )
        )
        job = CURRENT_JOB.get()
        withdraw = (
            job.on_abandon(lambda: _cancel(future))
            if job is not None and not changes_state
            else None
        )
        try:
            result = future.result(limit + self.connect_timeout_s + 2 + _reading_time(questions))
        except concurrent.futures.TimeoutError:  # a backstop: the SDK's own timeout is first
            future.cancel()
            raise timed_out(self.where, limit, changes_state=changes_state) from None
        except concurrent.futures.CancelledError:  # abandoned: nobody reads this any more
            raise ToolError("CANCELLED", f"the call to {self.where} was abandoned") from None
        finally:
            if withdraw is not None:
                withdraw()
        return result_of(result)

    async def aexecute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        """`execute_tool` awaited on the caller's loop, without a worker thread. Cancelling
        the await abandons a read (the server is told to cancel it) and, for a call that
        changes state, waits for its outcome and raises `ExecutionCancelled` with it."""
        self.check_call(tool_name, arguments)
        tool = self._tools[self._catalog().real.get(tool_name, tool_name)]
        changes_state = not tool.read_only
        limit = self._limit(arguments)
        future = asyncio.wrap_future(
            self._link.submit(
                self._call(
                    tool.name,
                    arguments,
                    limit,
                    _progress(PROGRESS.get()),
                    changes_state,
                    questions=QUESTIONS.get(),
                )
            )
        )
        if not changes_state:
            return result_of(await future)
        try:
            return result_of(await asyncio.shield(future))
        except asyncio.CancelledError:
            pass
        while True:  # a call that changes state: its outcome, whatever else is cancelled
            try:
                outcome = await asyncio.shield(future)
            except asyncio.CancelledError:
                continue
            except Exception as exc:
                raise ExecutionCancelled(exc) from exc
            raise ExecutionCancelled(result_of(outcome))

    def _limit(self, arguments: dict[str, Any]) -> float:
        """The call's deadline: `timeout_s`, plus the time its own arguments ask for."""
        extra = 0.0
        for key in _DURATION_ARGUMENTS:
            value = arguments.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                extra = max(extra, float(value) / 1000.0)
        return self.timeout_s + min(extra, 3600.0)

    async def _call(
        self,
        name: str,
        arguments: dict[str, Any],
        limit: float,
        progress: ProgressFnT | None,
        changes_state: bool,
        *,
        questions: Questions | None = None,
    ) -> types.CallToolResult:
        try:
            return await self._link.call(
                name, arguments, limit, progress, changes_state=changes_state, questions=questions
            )
        except ToolError:  # no connection: nothing was sent
            raise
        except TimeoutError:  # the one deadline of all its rounds (the server was told)
            self._link.failures += 1
            self._link.lost(f"no answer within {limit:g} s")
            raise timed_out(self.where, limit, changes_state=changes_state) from None
        except InputRequired:
            if questions is not None and questions.pending is not None:
                raise ToolError(  # the server handing the call back asks its client
                    "INPUT_REQUIRED",
                    f"{self.where} asks a question before it runs {name[:80]}; nothing was sent",
                ) from None
            self._link.failures += 1
            raise ToolError(
                "REMOTE_UNSUPPORTED",
                f"{self.where} asked for another round (input_required) instead of answering "
                f"{name[:80]}; a call that changes state is sent once per consent, so it was "
                "not sent again and did not complete",
            ) from None
        except InputRequiredRoundsExceededError:
            self._link.failures += 1
            raise ToolError(
                "REMOTE_ERROR",
                f"{self.where} asked for more rounds (input_required) than are followed "
                f"without answering {name[:80]}",
                retryable=True,
            ) from None
        except MCPError as exc:
            self._link.failures += 1
            if answer_too_large(exc):  # cut here; the connection is fine
                raise too_large(self.where, MAX_ANSWER_BYTES, changes_state=changes_state) from None
            if exc.code not in _TOOL_LEVEL:  # the connection is in doubt: a new one next
                self._link.lost(describe(exc))
            raise error_of(exc, where=self.where, changes_state=changes_state) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the transport's own error
            self._link.lost(describe(exc))
            self._link.failures += 1
            raise down_while_calling(
                self.where, describe(exc), changes_state=changes_state
            ) from None

    # -- health ------------------------------------------------------------------------

    def healthcheck(self) -> Health:
        """The connection (state, server, protocol, counters, the last error) and, when the
        server publishes one (`hwbridge://health`, as hwbridge's servers do), the bench's
        own health as the part `remote`. Connects when down; never raises."""
        link = self._link
        problems: list[str] = []
        parts: dict[str, Health] = {}
        try:
            wait = HEALTH_TIMEOUT_S + 1
            if HEALTH_URI in link.run(link.resources(HEALTH_TIMEOUT_S), wait):
                read = link.run(link.read_resource(HEALTH_URI, HEALTH_TIMEOUT_S), wait)
                parts["remote"] = _health_from(read)
        except ToolError as exc:
            problems.append(exc.message)
        except TimeoutError:
            problems.append(f"{self.where} did not answer within {HEALTH_TIMEOUT_S:g} s")
        except MCPError as exc:
            problems.append(f"the health of {self.where} could not be read: {exc.message}"[:300])
        except Exception as exc:
            link.lost(describe(exc))
            problems.append(f"{self.where} does not answer: {describe(exc)}")
        if link.state != "connected":
            status = "down"
        elif parts:
            status = parts["remote"].status
        else:
            status = "ok"
        if self._skipped:
            problems.append(f"{len(self._skipped)} of the server's tools are not offered")
        if self._unread:
            problems.append(
                f"{self._unread} more of the server's tools were not read (past {MAX_TOOLS})"
            )
        details = {
            "server": self.target.shown,
            "label": self.label,
            "state": link.state,
            "name": link.server,
            "protocol": link.protocol,
            "tools": len(self._tools),
            "read_only_here": sorted(n for n, t in self._tools.items() if t.read_only),
            "connections": link.connections,
            "calls": link.calls,
            "failures": link.failures,
            "last_error": link.last_error,
            "down_since": link.down_since,
            "skipped_tools": self.skipped_tools(),
        }
        return Health(status=status, details=details, problems=problems, parts=parts)

    def health(self) -> Health:
        """`healthcheck()`, by the name an Orchestrator of benches also answers to."""
        return self.healthcheck()

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """End the connection; returns once every server process this driver started has
        stopped (the SDK's shutdown: stdin closed, SIGTERM after 2 s, SIGKILL after 2 s
        more). Calls after this fail with REMOTE_DOWN."""
        self._link.close()

    def __enter__(self) -> McpToolDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"McpToolDriver({self.target.shown!r}, label={self.label!r})"


def names_tool(pattern: str, label: str | None, name: str) -> bool:
    """Whether the read-only `pattern` (a glob) names the tool `name` of the bench `label`.

    A pattern with a dot is `LABEL.NAME`, split at its first dot: its label part is matched
    against `label` only (labels have no dots), its name part against the tool's own name;
    an unlabelled bench has no label to match. A plain pattern matches the tool's own name
    only when that name has no dot. So a bench that names a tool `bench1.read_signals` gets
    nothing from `bench1.*` unless it *is* bench1, and a plain glob (`*`) never reaches a
    tool whose name looks labelled: name it with its bench (`bench2.bench1.*`).
    """
    if "." in pattern:
        label_part, _, name_part = pattern.partition(".")
        return label is not None and fnmatchcase(label, label_part) and fnmatchcase(name, name_part)
    return "." not in name and fnmatchcase(name, pattern)


def _target(
    url_or_command: str | Sequence[str],
    token: str | None,
    env: Mapping[str, str] | None,
    cwd: str | Path | None,
) -> Target:
    if token is not None and not token.strip():  # an unset variable must not mean "open"
        raise ValueError("the bearer token is empty: give a token, or token=None for none")
    if isinstance(url_or_command, str) and url_or_command.startswith(("http://", "https://")):
        if env is not None or cwd is not None:
            raise ValueError("env and cwd apply to a stdio command, not to a URL")
        return Target(url=url_or_command, token=token)
    words = shlex.split(url_or_command) if isinstance(url_or_command, str) else list(url_or_command)
    if not words or not all(isinstance(w, str) for w in words):
        raise ValueError("give an http(s):// URL or a command to start the server over stdio")
    if token is not None:
        raise ValueError("a bearer token only applies to an http(s):// URL")
    params = StdioServerParameters(
        command=words[0], args=words[1:], env=dict(env) if env else None, cwd=cwd
    )
    return Target(command=params)


def _cancel(future: concurrent.futures.Future[Any]) -> None:
    future.cancel()


def _reading_time(questions: Questions | None) -> float:
    """How long the person may take over a call's questions, beyond the call's own time."""
    if questions is None or not questions.can_ask:
        return 0.0
    return MAX_QUESTIONS * questions.timeout_s


def _progress(sink: ProgressSink | None) -> ProgressFnT | None:
    """The server's progress notifications, passed on to whoever waits for the call."""
    if sink is None:
        return None
    sink.claim()

    async def report(progress: float, total: float | None, message: str | None) -> None:
        sink.report(progress, total, message)

    return report


def _health_from(read: types.ReadResourceResult) -> Health:
    """The bench's own health report; a report that cannot be read is `unknown`."""
    for content in read.contents:
        text = getattr(content, "text", None)
        if isinstance(text, str) and len(text) < 1_000_000:
            try:
                data = orjson.loads(text)
                data.pop("checked_at", None)
                return Health.model_validate({**data, "checked_at": time.time()})
            except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError):
                break
    return Health(status="unknown", problems=["the server's health report cannot be read"])
