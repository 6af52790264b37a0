"""The discovery tools an LLM calls on a live bus: survey, snapshots, correlation, define,
marked events.

All of them listen only (`Tool.read_only`): they record the bus through the monitor that
already feeds the read tools and send nothing, except that with OBD-II as the reference
(`attach_obd`) a recording asks the vehicle for its mode 01 PIDs meanwhile (read-only
requests, within the send policy: `obd_poll`). Every result is bounded: the busiest ids
first, at most a few dozen, constant fields counted rather than listed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwbridge.__about__ import __version__
from hwbridge.can.tools.capture import _watch as watch_bus
from hwbridge.can.tools.reading import parse_frame_id
from hwbridge.core.contract import MCSToolDriver
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, ToolParameter
from hwbridge.discovery.analysis.correlate import CONFIRMED_R2, Series, correlate, scale_fit
from hwbridge.discovery.analysis.events import MAX_NAME_CHARS, WINDOW_S, EventMarks, rank_events
from hwbridge.discovery.analysis.multiplex import field_rows
from hwbridge.discovery.analysis.reference import Reference
from hwbridge.discovery.analysis.segment import bit_stats, segment
from hwbridge.discovery.analysis.survey import (
    MIN_R,
    MIN_SAMPLES,
    analyse_frames,
    build_report,
    significant,
)
from hwbridge.discovery.bits import bit_matrix, values
from hwbridge.discovery.frames import Collector, FrameKey, FrameSet, frame_key_text
from hwbridge.discovery.live.pages import MAX_PAGE_IDS
from hwbridge.discovery.live.session import UNIT, DefinedSignal, DiscoverySession, Snapshot
from hwbridge.discovery.live.texts import DiscoveryTexts, discovery_texts
from hwbridge.discovery.report.names import message_name

if TYPE_CHECKING:
    from hwbridge.can.network import Network
    from hwbridge.discovery.live.obd_poll import ObdPoller

__all__ = ["DiscoveryTools"]

MAX_RECORD_MS = 60_000
MIN_RECORD_MS = 100
MAX_MESSAGES = 40  # ids listed by survey_bus (busiest first)
MAX_FIELDS = 32  # fields listed per id
MAX_CANDIDATES = 10
MAX_CHANGES = 20
MAX_NOTES = 20
ANALYSIS_BUDGET_S = 5.0
_NAME_CHARS = 200
_UNIT_CHARS = 32


class DiscoveryTools(MCSToolDriver):
    """survey_bus, snapshot_bus, diff_snapshots, correlate_signal, define_signal, draft_dbc,
    mark_event and rank_events over one network, whose database grows as signals are defined
    (`session`), and match_known_databases when there are databases to match (opendbc's,
    `known`); `obd`, when attached, polls OBD-II PIDs as the reference while recording."""

    meta = DriverMeta(
        id="5b2e8f41-7c3a-4d9e-b6a1-2f8c0d4e7a19",
        name="hwbridge CAN discovery tools",
        version=__version__,
        bindings=[DriverBinding(capability="can-bus", adapter="python-can", spec_format="DBC")],
        capabilities=["orchestratable"],
    )

    def __init__(
        self,
        network: Callable[[], Network],
        session: DiscoverySession,
        *,
        texts: DiscoveryTexts | None = None,
        known: Sequence[str | Path] = (),
    ) -> None:
        from hwbridge.discovery.analysis.known import opendbc_available

        self._network = network
        self.session = session
        self.texts = texts or discovery_texts()
        self._known = tuple(known)
        self._matching = bool(self._known) or opendbc_available()
        self.marks = EventMarks()
        self.obd: ObdPoller | None = None
        self._tools = tuple(self._definitions())
        self._names = frozenset(t.name for t in self._tools)

    def attach_obd(self, poller: ObdPoller) -> None:
        """Take OBD-II as the reference: `poller` asks for PIDs while the tools record, and
        its answers are reference signals (`correlate_signal(signal="SPEED")`)."""
        self.obd = poller

    def guidance(self) -> str:
        """What the system prompt says about these tools (matching only when offered, OBD-II
        only when it is the reference)."""
        text = self.texts.guidance.discovery.strip()
        if self._matching:
            text += " " + self.texts.guidance.matching.strip()
        if self.obd is not None:
            text += "\n" + self.texts.guidance.obd.strip()
        return text

    def close(self) -> None:
        """Stop OBD-II polling, if any (the bus is the driver's)."""
        if self.obd is not None:
            self.obd.close()

    # -- MCSToolDriver ---------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def owns(self, name: str) -> bool:
        return name in self._names

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name not in self._names:
            raise ToolError("UNKNOWN_TOOL", f"{tool_name} is not a tool of this driver")
        handler: Callable[[Mapping[str, Any]], Any] = getattr(self, f"_tool_{tool_name}")
        return handler(dict(arguments))

    # -- definitions -----------------------------------------------------------------------

    def _tool(self, name: str, *params: ToolParameter) -> Tool:
        return self.texts.read_tool(name, *params)

    def _max_record_ms(self) -> int:
        """What the schema promises: at most what the bus monitor keeps of history."""
        try:
            monitor = self._network().monitor
        except Exception:  # no network yet: the bound itself
            monitor = None
        if monitor is None:
            return MAX_RECORD_MS
        return max(MIN_RECORD_MS, min(MAX_RECORD_MS, int(monitor.history_s * 1000)))

    def _definitions(self) -> list[Tool]:
        p = self.texts.parameter
        duration = {"type": "integer", "minimum": MIN_RECORD_MS, "maximum": self._max_record_ms()}
        snap = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"^[\w.\-]+$"}
        return [
            self._tool("survey_bus", p("survey_bus", "duration_ms", duration, True)),
            self._tool(
                "snapshot_bus",
                p("snapshot_bus", "name", snap, True),
                p("snapshot_bus", "duration_ms", duration, True),
            ),
            self._tool(
                "diff_snapshots",
                p("diff_snapshots", "a", snap, True),
                p("diff_snapshots", "b", snap, True),
            ),
            self._tool(
                "correlate_signal",
                p(
                    "correlate_signal",
                    "signal",
                    {"type": "string", "minLength": 1, "maxLength": _NAME_CHARS},
                    True,
                ),
                p("correlate_signal", "duration_ms", duration, True),
            ),
            self._tool(
                "define_signal",
                p(
                    "define_signal",
                    "name",
                    {"type": "string", "minLength": 1, "maxLength": 64},
                    True,
                ),
                p("define_signal", "id", {"type": ["integer", "string"], "maxLength": 32}, True),
                p(
                    "define_signal",
                    "start_bit",
                    {"type": "integer", "minimum": 0, "maximum": 511},
                    True,
                ),
                p(
                    "define_signal",
                    "length",
                    {"type": "integer", "minimum": 1, "maximum": 64},
                    True,
                ),
                p(
                    "define_signal",
                    "byte_order",
                    {"type": "string", "enum": ["little_endian", "big_endian"]},
                    True,
                ),
                p("define_signal", "signed", {"type": "boolean"}),
                p("define_signal", "is_float", {"type": "boolean"}),
                p("define_signal", "is_multiplexer", {"type": "boolean"}),
                p(
                    "define_signal",
                    "multiplexer_ids",
                    {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 0, "maximum": 65535},
                        "minItems": 1,
                        "maxItems": MAX_PAGE_IDS,
                        "uniqueItems": True,
                    },
                ),
                p("define_signal", "scale", {"type": "number"}),
                p("define_signal", "offset", {"type": "number"}),
                p(
                    "define_signal",
                    "unit",
                    {"type": "string", "maxLength": _UNIT_CHARS, "pattern": UNIT.pattern},
                ),
            ),
            self._tool("draft_dbc"),
            self._tool(
                "mark_event",
                p(
                    "mark_event",
                    "name",
                    {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS},
                    True,
                ),
            ),
            self._tool(
                "rank_events",
                p(
                    "rank_events",
                    "window_ms",
                    {"type": "integer", "minimum": 100, "maximum": 10000},
                ),
            ),
            *(
                [
                    self._tool(
                        "match_known_databases",
                        p("match_known_databases", "duration_ms", duration, True),
                        p("match_known_databases", "adopt", {"type": "boolean"}),
                    )
                ]
                if self._matching
                else []
            ),
        ]

    # -- recording -------------------------------------------------------------------------

    def _record(
        self, duration_ms: int, *, obd: Any = None
    ) -> tuple[dict[FrameKey, FrameSet], int, int, Collector]:
        """Listen for `duration_ms` (asking for OBD-II PIDs `obd` meanwhile, all when None,
        when OBD-II is the reference); the frames of every id seen, frames, real duration."""
        net = self._network()
        monitor = net.reader.require_bus()
        duration_s = min(max(duration_ms, MIN_RECORD_MS), MAX_RECORD_MS) / 1000.0
        if duration_s > monitor.history_s:
            raise ToolError(
                "INVALID_VALUE",
                f"the monitor keeps {monitor.history_s:g} s of history; record at most that",
            )
        polling = self.obd.polling(obd) if self.obd is not None else contextlib.nullcontext()
        with polling:
            start = monitor.now()
            lost = watch_bus(net.adapter, duration_s)
            end = monitor.now()
        records = monitor.history(start=start, end=end)
        if lost is not None and not records:
            raise ToolError(
                "BUS_DOWN",
                f"The bus went down during the recording ({lost}) before any frame was"
                " received; it is being reopened, try again in a few seconds.",
                retryable=True,
            )
        collector = Collector()
        collector.add_frames(
            (r.timestamp, r.arbitration_id, r.is_extended_id, r.data)
            for r in records
            if not (r.is_error_frame or r.is_remote_frame)
        )
        return collector.framesets(), len(records), round((end - start) * 1000), collector

    def _reference(self, framesets: Mapping[FrameKey, FrameSet] | None = None) -> Reference:
        """The database the driver was given: its messages are decoded, never searched; with
        OBD-II as the reference, also the OBD exchanges among `framesets`."""
        if self.obd is None:
            return Reference((self.session.base,))
        from hwbridge.discovery.analysis.obd_reference import ObdFrames, ObdReference

        frames = ObdFrames()
        frames.add_framesets(framesets or {})
        return ObdReference((self.session.base,), frames.exchanges())

    # -- tools -----------------------------------------------------------------------------

    def _tool_survey_bus(self, args: Mapping[str, Any]) -> Any:
        framesets, frames, duration, collector = self._record(int(args["duration_ms"]))
        if not framesets:
            raise ToolError(
                "NOT_RECEIVED", f"no frame was received in {duration} ms", retryable=True
            )
        reference = self._reference(framesets)
        found, left_out = analyse_frames(
            framesets,
            reference,
            deadline=time.monotonic() + ANALYSIS_BUDGET_S,
            extra_explained=self.session.defined_bits(),
        )
        report = build_report(found, reference, frames=frames)
        marked = self._marked_in(framesets, found, reference)
        messages = sorted(report.messages, key=lambda m: -m.frames)
        out: dict[str, Any] = {"messages": []}
        constants = 0
        for m in messages[:MAX_MESSAGES]:
            entry = m.model_dump(mode="json")
            kept = [_lean(s) for s in entry["signals"] if s["kind"] != "constant"]
            constants += len(entry["signals"]) - len(kept)
            entry["signals"] = kept[:MAX_FIELDS]
            out["messages"].append(entry)
        listed = {message_name(m["id"], m["extended"]) for m in out["messages"]}
        notes = [
            n.model_dump(exclude_none=True)
            for n in report.notes
            if n.message in listed or n.message == "*"
        ]
        if notes:
            out["notes"] = notes[:MAX_NOTES]
        out["duration_ms"] = duration
        out["frames"] = frames
        out["total"] = len(messages)  # ids found; the busiest `returned` are described
        out["returned"] = len(out["messages"])
        out["truncated"] = len(out["messages"]) < len(messages)
        if report.reference_messages:
            out["known_messages"] = report.reference_messages[:MAX_MESSAGES]
        omitted: dict[str, int] = {}
        if constants:
            omitted["constant_fields"] = constants
        if len(messages) > MAX_MESSAGES:
            omitted["messages"] = len(messages) - MAX_MESSAGES
        if left_out:
            omitted["ids_not_analysed"] = left_out
        dropped = collector.report_dropped().to_dict()
        if dropped.get("ids"):
            omitted["ids_past_bound"] = dropped["ids"]
        if omitted:
            out["omitted"] = omitted
        if marked:
            out["events"] = marked
        return out

    def _tool_snapshot_bus(self, args: Mapping[str, Any]) -> Any:
        name = str(args["name"])
        framesets, frames, duration, _ = self._record(int(args["duration_ms"]))
        dropped = self.session.keep(Snapshot(name, framesets, frames, duration))
        out: dict[str, Any] = {
            "snapshot": name,
            "duration_ms": duration,
            "frames": frames,
            "ids": len(framesets),
        }
        if dropped is not None:
            out["dropped_snapshot"] = dropped
        return out

    def _tool_diff_snapshots(self, args: Mapping[str, Any]) -> Any:
        a, b = self.session.snapshot(str(args["a"])), self.session.snapshot(str(args["b"]))
        reference = self._reference({**a.framesets, **b.framesets})
        changes: list[dict[str, Any]] = []
        common = set(a.framesets) & set(b.framesets)
        # the busiest ids first, within the same budget as a survey: a flood of ids cannot
        # hold the call, and what was not compared is said
        order = sorted(
            common,
            key=lambda k: (-(len(a.framesets[k].t) + len(b.framesets[k].t)), k),
        )
        deadline = time.monotonic() + ANALYSIS_BUDGET_S
        compared = 0
        defined = self.session.defined_bits()
        for key in order:
            if time.monotonic() > deadline:
                break
            if reference.message(key) is None:  # a described message is decoded instead
                changes += _diff(a.framesets[key], b.framesets[key], defined.get(key))
            compared += 1
        changes.sort(key=lambda c: -c["score"])
        out: dict[str, Any] = {
            "changes": changes[:MAX_CHANGES],
            "total": len(changes),
            "returned": min(len(changes), MAX_CHANGES),
            "truncated": len(changes) > MAX_CHANGES,
        }
        if len(changes) > MAX_CHANGES:
            out["more_changes"] = len(changes) - MAX_CHANGES
        if compared < len(order):
            out["ids_not_compared"] = len(order) - compared
        only_a = sorted(set(a.framesets) - set(b.framesets))
        only_b = sorted(set(b.framesets) - set(a.framesets))
        if only_a:
            out["ids_only_in_a"] = [frame_key_text(k) for k in only_a[:MAX_MESSAGES]]
        if only_b:
            out["ids_only_in_b"] = [frame_key_text(k) for k in only_b[:MAX_MESSAGES]]
        return out

    def _tool_correlate_signal(self, args: Mapping[str, Any]) -> Any:
        framesets, duration, series, qualified, unit = self._target(
            str(args["signal"]), int(args["duration_ms"])
        )
        if not len(series.v) or float(np.nanmax(series.v)) == float(np.nanmin(series.v)):
            raise ToolError(
                "NO_VARIATION",
                f"{qualified} did not change during the {duration} ms recorded; make it"
                " change (drive, press, turn) and try again",
                retryable=True,
            )
        found, _ = analyse_frames(
            framesets,
            self._reference(framesets),
            deadline=time.monotonic() + ANALYSIS_BUDGET_S,
            extra_explained=self.session.defined_bits(),
        )
        fields: list[tuple[FrameKey, Any, Series]] = []
        for item in found:
            bits = None
            for f in item.fields:
                if f.kind == "value" and f.distinct >= 3 and len(item.frames) >= MIN_SAMPLES:
                    if bits is None:
                        bits = bit_matrix(item.frames.data)
                    raw = f.raw(bits).astype(np.float64)
                    rows = field_rows(item.fields, f, bits)  # a page's field: its frames
                    fields.append((item.frames.key, f, Series(item.frames.t[rows], raw[rows])))
        c = correlate([s for _, _, s in fields], [series])
        ranked = sorted(range(len(fields)), key=lambda i: -abs(float(c.r[i, 0])))
        candidates = []
        for i in ranked[:MAX_CANDIDATES]:
            key, f, field_series = fields[i]
            fit = scale_fit(field_series, series)
            lag = 0.0
            if fit is None:
                scale, offset = float(c.scale[i, 0]), float(c.offset[i, 0])
                r2 = float(c.r[i, 0]) ** 2
            else:
                scale, offset, r2, lag = fit.scale, fit.offset, fit.r2, fit.lag_s
            candidates.append(
                {
                    "id": key[0],
                    "extended": key[1],
                    "start_bit": f.start_bit,
                    "length": f.length,
                    "byte_order": f.byte_order,
                    "signed": f.signed,
                    "r": round(float(c.r[i, 0]), 3),
                    "scale": significant(scale),
                    "offset": significant(offset),
                    "r2": round(r2, 4),
                    "verdict": "confirmed" if r2 >= CONFIRMED_R2 else "unconfirmed",
                    "lag_s": round(lag, 3),
                }
            )
            if f.is_float:
                candidates[-1]["is_float"] = True
            if f.multiplexer_ids is not None:
                candidates[-1]["multiplexer_ids"] = list(f.multiplexer_ids)
        out: dict[str, Any] = {
            "signal": qualified,
            "candidates": candidates,
            "total": len(fields),  # fields compared; the best `returned` are given
            "returned": len(candidates),
            "truncated": len(candidates) < len(fields),
        }
        if unit:
            out["unit"] = unit
        if candidates and abs(candidates[0]["r"]) < MIN_R:
            out["note"] = f"no field moved with {qualified} closely (|r| >= {MIN_R})"
        return out

    def _target(
        self, signal: str, duration_ms: int
    ) -> tuple[dict[FrameKey, FrameSet], int, Series, str, str | None]:
        """Record for `duration_ms`; the frames, the real duration, and the values of the
        known `signal` meanwhile (its name as given back, its unit): a signal of the
        database, or with OBD-II as the reference a PID (`SPEED`, `OBD_7E8.SPEED`)."""
        db = self.session.database
        try:
            spec = db.resolve_signal(signal)
        except ToolError:
            pid = None
            if self.obd is not None:
                from hwbridge.discovery.analysis.obd_reference import obd_pid

                pid = obd_pid(signal)
            if pid is None:
                raise
            return self._obd_target(signal, pid, duration_ms)
        message = db.message(spec.message)
        framesets, _, duration, _ = self._record(duration_ms)
        reference = Reference((db,))
        target: list[Series] = []
        name = str(message.name)
        for key, fs in framesets.items():
            if reference.message(key) is message:
                target += [
                    r.series
                    for r in reference.signals(fs)
                    if r.signal == spec.name and r.message == name
                ]
        if not target:
            raise ToolError(
                "NOT_RECEIVED",
                f"{spec.qualified} was not received in {duration} ms",
                retryable=True,
            )
        return framesets, duration, max(target, key=lambda s: len(s.t)), spec.qualified, spec.unit

    def _obd_target(
        self, signal: str, pid: Any, duration_ms: int
    ) -> tuple[dict[FrameKey, FrameSet], int, Series, str, str | None]:
        """`_target` for an OBD-II PID: only that PID is asked for while recording."""
        framesets, _, duration, _ = self._record(duration_ms, obd=[pid])
        reference = self._reference(framesets)
        exchanges = getattr(reference, "exchanges", None)
        found = None if exchanges is None else exchanges.named(signal)
        if found is None or len(found.series.t) < 2:
            problem = "" if self.obd is None else self.obd.describe().get("last_error", "")
            raise ToolError(
                "NOT_RECEIVED",
                f"no OBD-II answer for {signal} came in {duration} ms"
                + (f" ({problem})" if problem else "")
                + "; is the ignition on, and does the vehicle support that PID?",
                retryable=True,
            )
        return framesets, duration, found.series, f"{found.message}.{found.signal}", found.unit

    def _tool_define_signal(self, args: Mapping[str, Any]) -> Any:
        aid, extended = parse_frame_id(args["id"])
        key = (aid, extended)
        net = self._network()
        seen = None if net.monitor is None else net.monitor.latest(key)
        length = self.session.frame_length(key)
        if length is None:
            length = len(seen.data) if seen is not None else 8
        signal = DefinedSignal(
            name=str(args["name"]).strip(),
            frame_id=aid,
            extended=extended,
            start_bit=int(args["start_bit"]),
            length=int(args["length"]),
            byte_order=args["byte_order"],
            signed=bool(args.get("signed", False)),
            scale=float(args.get("scale", 1.0)),
            offset=float(args.get("offset", 0.0)),
            unit=str(args.get("unit", "") or ""),
            is_float=bool(args.get("is_float", False)),
            is_multiplexer=bool(args.get("is_multiplexer", False)),
            multiplexer_ids=_page_ids(args.get("multiplexer_ids")),
        )
        grown = self.session.define(signal, length)
        message = grown.message_for_frame(aid, extended)
        out: dict[str, Any] = {
            "defined": signal.name,
            "message": str(message.name) if message is not None else None,
            "id": frame_key_text(key),
            "signals_defined": len(self.session.defined),
        }
        if seen is not None and message is not None:
            decoded = grown.decode(message, seen.data).signals
            if signal.name in decoded:
                out["value"] = decoded[signal.name]
                if signal.unit:
                    out["unit"] = signal.unit
            elif signal.multiplexer_ids is not None:
                out["note"] = "the last frame received carries another page"
        else:
            out["note"] = f"{frame_key_text(key)} has not been received yet"
        return out

    def _tool_match_known_databases(self, args: Mapping[str, Any]) -> Any:
        from hwbridge.discovery.live.match_tool import match_tool

        framesets, frames, duration, _ = self._record(int(args["duration_ms"]))
        if not framesets:
            raise ToolError(
                "NOT_RECEIVED", f"no frame was received in {duration} ms", retryable=True
            )
        adopt = bool(args.get("adopt", False))
        return match_tool(framesets, frames, duration, self.session, self._known, adopt=adopt)

    def _tool_draft_dbc(self, args: Mapping[str, Any]) -> Any:
        defined = self.session.defined
        if not defined:
            return {"signals": 0, "dbc": "", "note": "no signal defined yet (define_signal)"}
        return {"signals": len(defined), "dbc": self.session.draft()}

    # -- marked events ---------------------------------------------------------------------

    def _tool_mark_event(self, args: Mapping[str, Any]) -> Any:
        monitor = self._network().reader.require_bus()
        try:
            mark = self.marks.add(str(args["name"]), monitor.now())
        except ValueError as exc:
            raise ToolError(
                "INVALID_VALUE", f"{exc}; name the moment, e.g. 'brake pressed'"
            ) from None
        marks = self.marks.all()
        return {
            "event": mark.name,
            "marks": sum(1 for m in marks if m.name == mark.name),
            "events": len({m.name for m in marks}),
            "history_s": monitor.history_s,
        }

    def _tool_rank_events(self, args: Mapping[str, Any]) -> Any:
        window_s = int(args.get("window_ms", WINDOW_S * 1000)) / 1000.0
        monitor = self._network().reader.require_bus()
        marks = self.marks.all()
        if not marks:
            raise ToolError("NOT_RECEIVED", "no moment has been marked yet: call mark_event first")
        oldest = monitor.now() - monitor.history_s
        usable = [m for m in marks if m.t - window_s >= oldest]
        if not usable:
            raise ToolError(
                "NOT_RECEIVED",
                f"every mark is older than the {monitor.history_s:g} s of bus history kept;"
                " mark the moments again and call rank_events within that time",
                retryable=True,
            )
        wait = usable[-1].t + window_s - monitor.now()
        if wait > 0:  # the window after the last mark must have been heard
            time.sleep(min(wait, window_s))
        end = monitor.now()
        collector = Collector()
        collector.add_frames(
            (r.timestamp, r.arbitration_id, r.is_extended_id, r.data)
            for r in monitor.history(start=max(oldest, end - monitor.history_s), end=end)
            if not (r.is_error_frame or r.is_remote_frame)
        )
        framesets = collector.framesets()
        if not framesets:
            raise ToolError("NOT_RECEIVED", "no frame is in the bus history", retryable=True)
        reference = self._reference(framesets)
        found, left_out = analyse_frames(
            framesets,
            reference,
            deadline=time.monotonic() + ANALYSIS_BUDGET_S,
            extra_explained=self.session.defined_bits(),
        )
        out: dict[str, Any] = {
            "events": self._rank(usable, framesets, found, reference, window_s),
            "marks": len(usable),
            "window_ms": round(window_s * 1000),
            "history_ms": round((end - min(fs.t[0] for fs in framesets.values())) * 1000),
        }
        if len(usable) < len(marks):
            out["marks_too_old"] = len(marks) - len(usable)
        if left_out:
            out["ids_not_analysed"] = left_out
        return out

    def _marked_in(
        self, framesets: Mapping[FrameKey, FrameSet], found: list[Any], reference: Reference
    ) -> list[dict[str, Any]]:
        """The events marked during a recording, ranked over it (none: [])."""
        if not framesets:
            return []
        t0 = min(float(fs.t[0]) for fs in framesets.values())
        t1 = max(float(fs.t[-1]) for fs in framesets.values())
        inside = [m for m in self.marks.all() if t0 <= m.t <= t1]
        return self._rank(inside, framesets, found, reference, WINDOW_S) if inside else []

    @staticmethod
    def _rank(
        marks: list[Any],
        framesets: Mapping[FrameKey, FrameSet],
        found: list[Any],
        reference: Reference,
        window_s: float,
    ) -> list[dict[str, Any]]:
        fields = {item.frames.key: item.fields for item in found if not item.described}
        skip = [key for key in framesets if reference.message(key) is not None]
        ranked = rank_events(
            marks,
            framesets,
            fields,
            window_s=window_s,
            skip=skip,
            deadline=time.monotonic() + ANALYSIS_BUDGET_S,
        )
        return [e.model_dump(mode="json") for e in ranked]


_LAYOUT_DEFAULTS = {"is_float": False, "is_multiplexer": False, "multiplexer_ids": None}


def _lean(signal: dict[str, Any]) -> dict[str, Any]:
    """A surveyed field without the float and multiplexer keys where they say nothing."""
    return {
        k: v
        for k, v in signal.items()
        if k not in _LAYOUT_DEFAULTS or (v is not None and v != _LAYOUT_DEFAULTS[k])
    }


def _window(fs: FrameSet, raw: np.ndarray) -> Any:
    """A field's values in one window: the value when constant, else min, max, mean."""
    lo, hi = int(raw.min()), int(raw.max())
    if lo == hi:
        return lo
    return {"min": lo, "max": hi, "mean": round(float(raw.mean()), 2)}


def _diff(a: FrameSet, b: FrameSet, explained: np.ndarray | None) -> list[dict[str, Any]]:
    """The fields of one id whose values differ between two recordings, scored: constant
    in both with different values scores 1 and more; a shifted distribution below 1.
    `explained`: bits known already (defined signals), left out."""
    length = min(a.length, b.length)
    if length == 0 or a.length != b.length:
        return []
    usable = np.ones(length * 8, np.bool_) if explained is None else ~explained[: length * 8]
    bits_a, bits_b = bit_matrix(a.data), bit_matrix(b.data)
    joined = np.concatenate([a.data, b.data])
    cont = np.concatenate([a.cont, np.r_[False, b.cont[1:]]])
    stats = bit_stats(bit_matrix(joined), cont)
    varying_a = (bits_a.max(axis=0) != bits_a.min(axis=0)) if len(a) else usable * False
    varying_b = (bits_b.max(axis=0) != bits_b.min(axis=0)) if len(b) else usable * False
    out: list[dict[str, Any]] = []
    taken = np.zeros(length * 8, np.bool_)
    for seg in segment(stats, length, usable):  # fields moving inside the windows
        taken[list(seg.bits)] = True
        ra, rb = values(bits_a, seg.bits), values(bits_b, seg.bits)
        before, after = _window(a, ra), _window(b, rb)
        if before == after:
            continue
        spread = float(np.sqrt((ra.var() + rb.var()) / 2)) + 1e-9
        effect = abs(float(rb.mean() - ra.mean())) / spread
        if isinstance(before, int) and isinstance(after, int):
            score = 1.0 + 1.0 / len(seg.bits)
        else:
            score = min(0.99, effect / 10.0)
        if score < 0.01:
            continue
        out.append(
            _change(a.key, seg.bits, order=seg.order, before=before, after=after, score=score)
        )
    # bits constant in each window but different between them: within a byte, from the
    # lowest to the highest such bit, over bits constant in both (one value that changed,
    # say a throttle from 40% to 0, not one change per bit); one bit scores highest
    steady = usable & ~taken & ~varying_a & ~varying_b
    flipped = steady & (bits_a[0] != bits_b[0])
    for byte in range(length):
        positions = [p for p in range(byte * 8, byte * 8 + 8) if flipped[p]]
        while positions:
            lo = positions[0]
            hi = lo
            for p in positions[1:]:
                if all(steady[lo : p + 1]):
                    hi = p
            chain = tuple(range(lo, hi + 1))
            positions = [p for p in positions if p > hi]
            before, after = int(values(bits_a[:1], chain)[0]), int(values(bits_b[:1], chain)[0])
            score = 1.0 + 1.0 / len(chain)
            out.append(_change(a.key, chain, order=None, before=before, after=after, score=score))
    return out


def _change(
    key: FrameKey,
    bits: tuple[int, ...],
    *,
    order: str | None,
    before: Any,
    after: Any,
    score: float,
) -> dict[str, Any]:
    byte_order = order or "little_endian"
    start = bits[0] if byte_order == "little_endian" else bits[-1]
    return {
        "id": key[0],
        "extended": key[1],
        "start_bit": start,
        "length": len(bits),
        "byte_order": byte_order,
        "before": before,
        "after": after,
        "score": round(score, 3),
    }


def _page_ids(given: Any) -> tuple[int, ...] | None:
    """multiplexer_ids as given (the schema made them a list of integers), or None."""
    if given is None:
        return None
    return tuple(int(v) for v in given)
