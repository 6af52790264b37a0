"""The query worker: a child process that holds the locked DuckDB and answers one query at a time.

It exists so that a query can be stopped for certain. Some DuckDB functions never look at an
interrupt and some allocate outside DuckDB's `memory_limit`; only the operating system can stop
those. So the parent (`sql_sandbox.QuerySandbox`) kills this process at the timeout or when its
resident memory passes the limit, and the worker itself runs under an address-space limit
(`RLIMIT_AS`) set once DuckDB and the tables are loaded, so an allocation past it fails at once.

The connection is locked as before: the tables are pyarrow datasets registered on it, DuckDB's
own file system is shut (`enable_external_access` false), no extension loads, no temporary
directory, Python objects are not scanned by name, and `lock_configuration` makes every setting
final. Model SQL passes `sql_checks` first. Results are sized in Arrow and cut before they
become Python values (`sql_results`).

Protocol on stdin/stdout: frames of a 4-byte big-endian length and a payload. The parent sends
pickles (it is the trusted side); the worker answers in JSON only, so that nothing a query
produces is ever unpickled by the parent.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

import duckdb
import orjson
import pyarrow as pa  # type: ignore[import-untyped]

from hwbridge.captures.dataset import Table
from hwbridge.captures.sql.checks import CheckFailed, Refused, check_plan, check_tree, one_select
from hwbridge.captures.sql.results import bounded_rows

__all__ = ["main", "read_frame", "write_frame"]

_HEADER = struct.Struct(">I")
MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_NAME_CHARS = 200  # a column name longer than this is cut


def read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame's payload, or None at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_REQUEST_BYTES:
        return None
    payload = stream.read(size)
    return payload if len(payload) == size else None


def write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _vm_bytes() -> int | None:
    """This process's virtual size (Linux), the base of its address-space limit."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _limit_address_space(extra: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the parent's wall-time kill is the bound
        return
    base = _vm_bytes()
    if base is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = base + extra
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


class _NoPandas:
    """An import finder that says pandas is not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _import_arrow_dataset() -> None:
    """Import pyarrow.dataset (the tables are registered as pyarrow datasets) without pandas.

    As it loads, pyarrow.dataset builds a scalar, and pyarrow then imports pandas to ask
    whether the value is a pandas object: 0.2 s of every worker's start, for a library the
    worker never uses (results leave as Arrow, then JSON; DuckDB scans Arrow). With pandas
    hidden during that one import, pyarrow settles on "no pandas" for this process; nothing
    else changes, and pandas stays importable afterwards."""
    if "pandas" in sys.modules or "pyarrow.dataset" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        import pyarrow.dataset  # type: ignore[import-untyped]  # noqa: F401
    finally:
        sys.meta_path.remove(finder)


def _exit_with_parent() -> None:
    """End when the parent has gone (its pipe closes only once a query is done)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="hwbridge-sql-parent", daemon=True).start()


class Worker:
    """The locked connection and the answers to requests."""

    def __init__(self, tables: Sequence[Table], settings: dict[str, Any]) -> None:
        self.max_rows = int(settings["max_rows"])
        self.max_chars = int(settings["max_chars"])
        self.max_columns = int(settings["max_columns"])
        self.memory_limit = str(settings["memory_limit"])
        self.names = frozenset(t.name.lower() for t in tables)
        self.broken = False  # DuckDB said it can no longer be trusted: replace this worker
        config: dict[str, Any] = {
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "allow_unsigned_extensions": False,
            "python_enable_replacements": False,
            "temp_directory": "",
            "threads": int(settings["threads"]),
            "memory_limit": self.memory_limit,
        }
        self.con = duckdb.connect(":memory:", config=config)
        for table in tables:
            self.con.register(table.name, table.arrow_dataset())
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute("SET lock_configuration = true")

    def answer(self, request: dict[str, Any]) -> bytes:
        """The response to one request, as JSON; never raises for anything a query does."""
        try:
            return self._answer(request)
        except TypeError as exc:  # orjson: a value nested too deeply, an unknown type
            return _error("QUERY_FAILED", f"The result cannot be sent: {exc}")
        except Refused as exc:
            return _error("QUERY_REFUSED", str(exc))
        except CheckFailed as exc:
            return _error("QUERY_FAILED", str(exc))
        except duckdb.PermissionException as exc:
            return _error("QUERY_REFUSED", f"The query tried to reach outside the dataset: {exc}")
        except (duckdb.OutOfMemoryException, MemoryError, pa.ArrowMemoryError):
            return _error(
                "QUERY_FAILED",
                f"The query needs more than {self.memory_limit} of memory; ask for less.",
            )
        except duckdb.InvalidInputException as exc:
            if "configuration has been locked" in str(exc):
                return _error("QUERY_REFUSED", f"Settings are locked: {exc}")
            return _error("QUERY_FAILED", str(exc), restart="unfinished result" in str(exc))
        except duckdb.Error as exc:
            broken = isinstance(exc, duckdb.FatalException | duckdb.InternalException)
            return _error("QUERY_FAILED", str(exc), restart=broken)
        except (OverflowError, ValueError) as exc:
            return _error(
                "QUERY_FAILED",
                f"A value of the result cannot be shown ({exc}): an infinite or out-of-range "
                "date or number; cast it to VARCHAR or filter it out.",
            )
        except RecursionError:
            return _error("QUERY_FAILED", "The query or its result is nested too deeply.")
        except Exception as exc:  # a fault of ours: said as it is, and the worker goes on
            return _error("QUERY_FAILED", f"The query could not be answered: {exc!r}")

    def _answer(self, request: dict[str, Any]) -> bytes:
        started = time.monotonic()
        sql = str(request["sql"])
        params = request.get("params")
        max_rows = int(request.get("max_rows") or self.max_rows)
        max_chars = int(request.get("max_chars") or self.max_chars)
        if request.get("kind") == "query":
            sql = one_select(sql)
            check_tree(self.con, sql, self.names)
            check_plan(self.con, sql)
            params = None
        relation = self.con.sql(sql, params=list(params) if params is not None else None)
        if relation is None:  # not a query after all
            raise Refused("Only SELECT queries are answered.")
        whole = relation
        names = [str(c)[:MAX_NAME_CHARS] for c in relation.columns]
        kinds = list(relation.types)
        shown = _columns_within(names[: self.max_columns], max_chars // 2)
        exact_ints = frozenset(i for i in range(shown) if kinds[i].id in _HUGE)
        shaped = [_shaped(f"#{i + 1}", kinds[i]) for i in range(shown)]
        if shown < len(names) or any(shaped[i] != f"#{i + 1}" for i in range(shown)):
            # extra columns are never fetched; some values are shaped by DuckDB, see _shaped
            relation = relation.project(
                ", ".join(f"{shaped[i]} AS {_quote(names[i])}" for i in range(shown))
            )
        header = orjson.dumps(names[:shown])
        table = relation.limit(max_rows + 1).to_arrow_table()
        rows, returned, truncated = bounded_rows(
            table, max_rows, max_chars - len(header), exact_ints
        )
        head: dict[str, Any] = {
            "ok": True,
            "columns": names[:shown],
            "column_count": len(names),
            "truncated": truncated or shown < len(names),
            "returned": returned,
        }
        if table.num_rows <= max_rows:  # every row was fetched: the total is known
            head["total"] = table.num_rows
        else:
            head["total"] = self._count(whole, request, started)
            if head["total"] is None:
                head["total_at_least"] = table.num_rows
        if self.broken:
            head["restart"] = True
        # the rows are JSON already: spliced in, not encoded twice
        return orjson.dumps(head)[:-1] + b',"rows":[' + rows + b"]}"

    def _count(self, relation: Any, request: dict[str, Any], started: float) -> int | None:
        """How many rows `relation` has, counted by DuckDB without fetching them, when that
        ends within the request's `count_s` and well inside its `timeout_s` (the parent kills
        the worker at the timeout: a count must never cost the rows already found); None
        when there is no time for it, it was interrupted, or it failed."""
        budget = float(request.get("count_s") or 0.0)
        timeout = float(request.get("timeout_s") or 0.0)
        reserve = max(timeout * (1 - COUNT_SHARE), ANSWER_RESERVE_S)
        left = min(budget, started + timeout - reserve - time.monotonic())
        if left < MIN_COUNT_S:
            return None
        with _interrupted_after(self.con, left):
            try:
                counted = relation.aggregate("count(*)").fetchall()
            except (duckdb.FatalException, duckdb.InternalException):
                self.broken = True  # the rows stand; the worker is replaced after answering
                return None
            except Exception:  # interrupted, out of memory, a value failing past the rows:
                return None  # the count never costs the rows already found
        return int(counted[0][0]) if counted else None


COUNT_SHARE = 0.8
"""A count ends by this share of the request's timeout, leaving the rest to answer..."""
ANSWER_RESERVE_S = 1.0
"""... and at least this long: an interrupted count, the rows' encoding and the way back to
the parent took more than the 0.3 s a 1.5 s timeout left on a loaded machine."""
MIN_COUNT_S = 0.05


@contextmanager
def _interrupted_after(con: Any, seconds: float) -> Iterator[None]:
    """Interrupt what `con` runs once `seconds` have passed, unless the block ended first.
    An interrupt that lands just after the block is harmless: DuckDB clears it when the
    next statement starts."""
    lock = threading.Lock()
    running = [True]

    def fire() -> None:
        with lock:
            if running[0]:
                con.interrupt()

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            running[0] = False
        timer.cancel()


_INFINITE = (
    "error('A value of the result is an infinite date or time, which JSON cannot hold; "
    "cast it to VARCHAR or filter it out.')"
)


def _time_text(ref: str, zone: str) -> str:
    """A timestamp as ISO 8601 text, as `datetime.isoformat` writes it (no fraction when it is
    zero), made by DuckDB: many times faster than Python datetimes, and exact."""
    text = f"replace(strftime({ref}, '%Y-%m-%dT%H:%M:%S.%f{zone}'), '.000000', '')"
    return f"CASE WHEN isfinite({ref}) THEN {text} ELSE {_INFINITE} END"


# DuckDB types whose values reach JSON as they are (through Arrow, then orjson)
_PLAIN = frozenset(
    {
        "boolean",
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "float",
        "double",
        "varchar",
        "date",
        "time",
        "timestamp",
        "timestamp with time zone",
        "timestamp_s",
        "timestamp_ms",
        "blob",
        "uuid",
        "enum",
    }
)
_HUGE = frozenset({"hugeint", "uhugeint"})
_NESTED = frozenset({"list", "array", "struct", "map"})
_FLOAT_DIGITS = 15  # a decimal with more digits and a fraction would lose them as a double


def _plain(kind: Any) -> bool:
    """True when every value of this DuckDB type (a `DuckDBPyType`) becomes the right JSON
    value without help."""
    if kind.id in _PLAIN:
        return True
    if kind.id == "decimal":
        precision, scale = (value for _, value in kind.children)
        return int(scale) == 0 or int(precision) <= _FLOAT_DIGITS
    if kind.id in _NESTED:
        # children are (name, type) pairs; an array's size comes as an int
        return all(_plain(child) for _, child in kind.children if hasattr(child, "id"))
    return False


def _shaped(ref: str, kind: Any) -> str:
    """The expression that fetches a result column. HUGEINT as text (Arrow would wrap it),
    timestamps as ISO text in UTC (the session's zone). A type JSON cannot carry as it is
    (a wide decimal, an interval, a time with its zone, bits, big numbers, unions; or a list
    or struct holding one) comes as DuckDB's own text of the value, never as its internal
    bytes or a rounded number."""
    if kind.id in _HUGE:
        return f"CAST({ref} AS VARCHAR)"
    if kind.id == "timestamp with time zone":
        return _time_text(ref, "Z")
    if kind.id == "timestamp":
        return _time_text(ref, "")
    if _plain(kind):
        return ref
    return f"CAST({ref} AS VARCHAR)"


def _columns_within(names: list[str], budget: int) -> int:
    """How many of the first names fit the budget of characters (at least one)."""
    used = 2
    for count, name in enumerate(names):
        used += len(orjson.dumps(name)) + 1
        if used > budget:
            return max(count, 1)
    return len(names)


def _error(code: str, message: str, *, restart: bool = False) -> bytes:
    return orjson.dumps({"ok": False, "code": code, "message": message[:2000], "restart": restart})


def main() -> int:
    """Serve requests on stdin/stdout until the parent closes the pipe."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print cannot break a frame
    source = sys.stdin.buffer
    _exit_with_parent()
    _import_arrow_dataset()  # before the tables arrive: a worker may be started early
    first = read_frame(source)
    if first is None:
        return 1
    init = pickle.loads(first)
    worker = Worker(init["tables"], init["settings"])
    address_space = init["settings"].get("address_space")
    if address_space:
        _limit_address_space(int(address_space))
    write_frame(out, orjson.dumps({"ready": True, "pid": os.getpid()}))
    while True:
        payload = read_frame(source)
        if payload is None:
            return 0
        write_frame(out, worker.answer(pickle.loads(payload)))


if __name__ == "__main__":
    sys.exit(main())
