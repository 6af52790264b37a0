"""CanToolDriver: the CAN tools, built from the database and the send policy.

Generic tools keep the prompt the same size whatever the database; typed `read_<Message>` /
`send_<Message>` tools are added when they fit the prompt budget. Send tools exist only when
the policy allows sending. The tool driver knows nothing about LLMs (spec section 4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from hwbridge.__about__ import __version__
from hwbridge.can.tools.capture import MAX_CAPTURE_MS, capture
from hwbridge.can.tools.reading import MAX_TIMEOUT_MS, OPS
from hwbridge.can.tools.series import history_series, resolve_signals
from hwbridge.can.tools.texts import CanTexts, can_texts
from hwbridge.can.tools.typed import TypedTool, read_tool, send_tool
from hwbridge.can.transport.adapter import AdapterStatus
from hwbridge.can.transport.monitor import BusMonitor, frame_id_text
from hwbridge.core.contract import MCSToolDriver
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, ToolParameter
from hwbridge.plot.series import MAX_POINTS, timeseries_result
from hwbridge.policy import SendPolicy

if TYPE_CHECKING:  # a Network holds this package's readers and senders
    from hwbridge.can.network import Network

__all__ = ["CanToolDriver", "Exposure"]

Exposure = Literal["auto", "catalog", "messages"]
_ADAPTER_FIELDS = frozenset(AdapterStatus.__dataclass_fields__)
MAX_LISTED = 100
# Every string argument has a length bound, so no argument can make a tool work for long:
# names (messages, signals, networks), free text (a filter, a search), labels, ids, hex bytes.
NAME_CHARS = 200
FILTER_CHARS = 100
QUERY_CHARS = 200
LABEL_CHARS = 256  # real DBC value labels run to 117 characters (opendbc vw_mlb)
ID_CHARS = 32
HEX_CHARS = 400  # 64 bytes written as "0x01, 0x02, ..."
MAX_DESCRIBED_SIGNALS = 40
MAX_PLOTTED = 8  # signals in one picture
MAX_LOOKBACK_S = 3600  # start/end of the tools that show: seconds before now
DEFAULT_POINTS = 200
_ENUM_LIMIT = 60  # list allowed messages as an enum up to this many
_SENDING = frozenset({"send_message", "send_frame", "start_periodic", "stop_periodic"})


def _timeout(texts: CanTexts, tool: str, maximum: int = MAX_TIMEOUT_MS) -> ToolParameter:
    return ToolParameter(
        name="timeout_ms",
        description=texts.param(tool, "timeout_ms"),
        schema={"type": "integer", "minimum": 0, "maximum": maximum},
    )


class CanToolDriver(MCSToolDriver):
    """The CAN tools over one or more networks; immutable after construction."""

    meta = DriverMeta(
        id="0b6f3c1e-6a0d-4c5e-9f51-3d2a8e7c4b10",
        name="hwbridge CAN tools",
        version=__version__,
        bindings=[DriverBinding(capability="can-bus", adapter="python-can", spec_format="DBC")],
        capabilities=["orchestratable", "multi_connection"],
    )

    def __init__(
        self,
        networks: Sequence[Network],
        policy: SendPolicy,
        *,
        exposure: Exposure = "auto",
        fits: Callable[[list[Tool]], bool] | None = None,
        texts: CanTexts | None = None,
    ) -> None:
        if not networks:
            raise ValueError("a CanToolDriver needs at least one network")
        if exposure not in ("auto", "catalog", "messages"):
            raise ValueError("exposure must be 'auto', 'catalog' or 'messages'")
        self.texts = texts or can_texts()
        self.policy = policy
        self.networks = {n.name: n for n in networks}
        if len(self.networks) != len(networks):
            raise ValueError("network names must be unique")
        self._multi = len(networks) > 1
        generic = self._generic_tools()
        typed: list[tuple[Tool, TypedTool]] = []
        if exposure != "catalog" and not self._multi:
            typed = self._typed_tools(networks[0], taken={t.name for t in generic})
            if (
                exposure == "auto"
                and fits is not None
                and not fits(generic + [t for t, _ in typed])
            ):
                sends = [(t, k) for t, k in typed if k.kind == "send"]
                typed = sends if sends and fits(generic + [t for t, _ in sends]) else []
        self._generic = tuple(generic)
        self._tools = tuple(generic + [t for t, _ in typed])
        self._typed = {t.name: k for t, k in typed}
        self.exposure = "messages" if typed else "catalog"

    def replace_network(self, network: Network) -> None:
        """Read a network through a database that grew at run time (see
        `Network.with_database`). The tool list does not change; the network is swapped
        whole (one atomic assignment), so every call sees one database."""
        if network.name not in self.networks:
            raise ValueError(f"no network {network.name!r}")
        self.networks[network.name] = network

    # -- MCSToolDriver ---------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def essential_tools(self) -> list[Tool]:
        """The generic tools alone: what to keep when the prompt must be shorter."""
        return list(self._generic)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        typed = self._typed.get(tool_name)
        if typed is not None:
            return self._typed_call(typed, dict(arguments))
        handler = getattr(self, f"_tool_{tool_name}", None)
        if handler is None or tool_name not in {t.name for t in self._tools}:
            raise ToolError("UNKNOWN_TOOL", f"{tool_name} is not a tool of this driver")
        args = dict(arguments)
        network = self._network(args.pop("network", None))
        return handler(network, args)

    # -- tool definitions ------------------------------------------------------------------

    def _tool(self, name: str, *params: ToolParameter) -> Tool:
        all_params = list(params)
        if self._multi:
            all_params.insert(
                0,
                ToolParameter(
                    name="network",
                    description=self.texts.param("list_messages", "network"),
                    required=True,
                    schema={"type": "string", "enum": list(self.networks)},
                ),
            )
        return Tool(
            name=name,
            description=self.texts.tool(name),
            parameters=all_params,
            read_only=name not in _SENDING,
        )

    def _generic_tools(self) -> list[Tool]:
        p = self.texts.parameter
        text = {"type": "string", "minLength": 1, "maxLength": NAME_CHARS}
        names = {"type": "array", "items": text, "minItems": 1, "maxItems": 50}
        frame_id = {"type": ["integer", "string"], "maxLength": ID_CHARS}
        hex_bytes = {"type": "string", "maxLength": HEX_CHARS}
        seconds = {"type": "number", "minimum": -MAX_LOOKBACK_S, "maximum": 0}
        plotted = {**names, "maxItems": MAX_PLOTTED}
        tools = [
            self._tool(
                "list_messages",
                p("list_messages", "filter", {"type": "string", "maxLength": FILTER_CHARS}),
            ),
            self._tool("describe_message", p("describe_message", "message", text, True)),
            self._tool(
                "search_signals",
                p(
                    "search_signals",
                    "query",
                    {"type": "string", "minLength": 1, "maxLength": QUERY_CHARS},
                    True,
                ),
                p("search_signals", "limit", {"type": "integer", "minimum": 1, "maximum": 50}),
            ),
            self._tool(
                "read_signals",
                p("read_signals", "signals", names, True),
                p("read_signals", "max_age_ms", {"type": "integer", "minimum": 0}),
                _timeout(self.texts, "read_signals"),
            ),
            self._tool(
                "read_message",
                p("read_message", "message", text, True),
                _timeout(self.texts, "read_message"),
            ),
            self._tool(
                "wait_for_signal",
                p("wait_for_signal", "signal", text, True),
                p("wait_for_signal", "op", {"type": "string", "enum": list(OPS)}, True),
                p(
                    "wait_for_signal",
                    "value",
                    {"type": ["number", "string"], "maxLength": LABEL_CHARS},
                    True,
                ),
                ToolParameter(
                    name="timeout_ms",
                    description=self.texts.param("wait_for_signal", "timeout_ms"),
                    required=True,
                    schema={"type": "integer", "minimum": 0, "maximum": MAX_TIMEOUT_MS},
                ),
            ),
            self._tool(
                "capture",
                p(
                    "capture",
                    "duration_ms",
                    {"type": "integer", "minimum": 10, "maximum": MAX_CAPTURE_MS},
                    True,
                ),
                p("capture", "messages", names),
            ),
            self._tool(
                "signal_timeseries",
                p("signal_timeseries", "signal", text, True),
                p("signal_timeseries", "start", seconds),
                p("signal_timeseries", "end", seconds),
                p(
                    "signal_timeseries",
                    "max_points",
                    {"type": "integer", "minimum": 2, "maximum": MAX_POINTS},
                ),
            ),
            self._tool(
                "plot_signals",
                p("plot_signals", "signals", plotted, True),
                p("plot_signals", "start", seconds),
                p("plot_signals", "end", seconds),
            ),
            self._tool("bus_status"),
            self._tool(
                "decode_frame",
                p("decode_frame", "id", frame_id, True),
                p("decode_frame", "data", hex_bytes, True),
            ),
        ]
        if not self.policy.allows_sending:
            return tools
        message = self._sendable_schema()
        values = {
            "type": "object",
            "propertyNames": {"maxLength": NAME_CHARS},
            "additionalProperties": {"type": ["number", "string"], "maxLength": LABEL_CHARS},
            "maxProperties": 256,
        }
        if any(self._sendable(n) for n in self.networks.values()):
            tools += [
                self._tool(
                    "send_message",
                    p("send_message", "message", message, True),
                    p("send_message", "signals", values),
                    p("send_message", "dry_run", {"type": "boolean"}),
                ),
                self._tool(
                    "start_periodic",
                    p("start_periodic", "message", message, True),
                    p("start_periodic", "signals", values),
                    p(
                        "start_periodic",
                        "period_ms",
                        {"type": "integer", "minimum": 10, "maximum": 60_000},
                        True,
                    ),
                ),
                self._tool("stop_periodic", p("stop_periodic", "message", message, True)),
            ]
        if self.policy.allows_raw_frames:
            tools.append(
                self._tool(
                    "send_frame",
                    p("send_frame", "id", frame_id, True),
                    p("send_frame", "data", hex_bytes, True),
                    p("send_frame", "extended", {"type": "boolean"}),
                )
            )
        return tools

    def _sendable(self, network: Network) -> list[str]:
        """The messages the policy lets out that can cross the network's transport: no CAN FD
        message over socketcand (sending one could only fail, UNSUPPORTED)."""
        classic = _classic_only(network)
        return [
            m.name
            for m in network.db.messages
            if self.policy.allows_message(m.name) and not (classic and _is_fd(m))
        ]

    def _sendable_schema(self) -> dict[str, Any]:
        names = sorted({n for net in self.networks.values() for n in self._sendable(net)})
        if 0 < len(names) <= _ENUM_LIMIT:
            return {"type": "string", "enum": names}
        return {"type": "string", "minLength": 1, "maxLength": NAME_CHARS}

    def _typed_tools(self, network: Network, taken: set[str]) -> list[tuple[Tool, TypedTool]]:
        """Typed tools, skipping any whose name is taken (a message called `signals` would
        otherwise shadow the generic read_signals)."""
        out: list[tuple[Tool, TypedTool]] = []
        taken = set(taken)
        classic = _classic_only(network)
        for message in network.db.messages:
            if classic and _is_fd(message):
                continue  # never crosses this transport: a tool that could only fail
            read = read_tool(network.db, message, self.texts)
            if read is not None and read.name not in taken:
                taken.add(read.name)
                out.append((read, TypedTool("read", message.name)))
        if self.policy.allows_sending:
            for name in self._sendable(network):  # FD ones left out over socketcand
                send = send_tool(network.db, network.db.message(name), self.texts)
                if send is not None and send.name not in taken:
                    taken.add(send.name)
                    out.append((send, TypedTool("send", name)))
        return out

    # -- dispatch --------------------------------------------------------------------------

    def _network(self, name: str | None) -> Network:
        if name is None:
            if self._multi:
                raise ToolError(
                    "INVALID_VALUE", f"name the network: one of {', '.join(self.networks)}"
                )
            return next(iter(self.networks.values()))
        network = self.networks.get(name)
        if network is None:
            raise ToolError(
                "INVALID_VALUE", f"no network {name!r}; networks: {', '.join(self.networks)}"
            )
        return network

    def _typed_call(self, typed: TypedTool, args: dict[str, Any]) -> Any:
        network = self._network(None)
        if typed.kind == "read":
            return network.reader.read_message(typed.message, args.get("timeout_ms"))
        dry_run = bool(args.pop("dry_run", False))
        return network.sender.send_message(
            typed.message, args, dry_run=dry_run, tool=f"send_{typed.message}"
        )

    def _tool_list_messages(self, net: Network, args: Mapping[str, Any]) -> Any:
        messages = net.db.list_messages(args.get("filter"))
        shown = [
            {k: m[k] for k in ("name", "id", "cycle_time_ms", "signals") if m.get(k) is not None}
            for m in messages[:MAX_LISTED]
        ]
        out: dict[str, Any] = {
            "total": len(messages),
            "returned": len(shown),
            "truncated": len(shown) < len(messages),
            "messages": shown,
        }
        if len(messages) > MAX_LISTED:
            out["more"] = len(messages) - MAX_LISTED
        return out

    def _tool_describe_message(self, net: Network, args: Mapping[str, Any]) -> Any:
        out = net.db.describe_message(args["message"])
        out["sendable"] = self.policy.allows_message(out["name"])
        signals = out["signals"]
        shown = signals[:MAX_DESCRIBED_SIGNALS]  # e.g. OBD DBCs: hundreds per message
        out["signals"] = shown
        # the list of signals says what was cut, as every list a model gets does
        out["total"] = len(signals)
        out["returned"] = len(shown)
        out["truncated"] = len(shown) < len(signals)
        if len(shown) < len(signals):
            out["more_signals"] = len(signals) - len(shown)
        return out

    def _tool_search_signals(self, net: Network, args: Mapping[str, Any]) -> Any:
        results, total = net.db.search_signals_counted(args["query"], int(args.get("limit", 10)))
        return {
            "results": results,
            "total": total,
            "returned": len(results),
            "truncated": len(results) < total,
        }

    def _tool_read_signals(self, net: Network, args: Mapping[str, Any]) -> Any:
        return net.reader.read_signals(
            list(args["signals"]), args.get("max_age_ms"), args.get("timeout_ms")
        )

    def _tool_read_message(self, net: Network, args: Mapping[str, Any]) -> Any:
        if _classic_only(net):
            message = net.db.message(args["message"])
            if _is_fd(message):
                raise ToolError(
                    "UNSUPPORTED",
                    f"{message.name} is a CAN FD message and this bus carries classic frames "
                    "only (socketcand); it can never be received here.",
                )
        return net.reader.read_message(args["message"], args.get("timeout_ms"))

    def _tool_wait_for_signal(self, net: Network, args: Mapping[str, Any]) -> Any:
        return net.reader.wait_for_signal(
            args["signal"], args["op"], args["value"], args["timeout_ms"]
        )

    def _tool_capture(self, net: Network, args: Mapping[str, Any]) -> Any:
        monitor = self._monitor(net)
        return capture(
            net.db, monitor, args["duration_ms"], args.get("messages"), adapter=net.adapter
        )

    def _tool_signal_timeseries(self, net: Network, args: Mapping[str, Any]) -> Any:
        monitor = self._monitor(net)
        specs = resolve_signals(net.db, [args["signal"]], limit=1)
        points = int(args.get("max_points") or DEFAULT_POINTS)
        (series,) = history_series(
            net.db,
            monitor,
            specs,
            points // 2,
            start_s=args.get("start"),
            end_s=args.get("end"),
            extremes_only=True,
        )
        return timeseries_result(series)

    def _tool_plot_signals(self, net: Network, args: Mapping[str, Any]) -> Any:
        from hwbridge.plot.results import PLOT_WIDTH_PX, picture_result

        monitor = self._monitor(net)
        specs = resolve_signals(net.db, list(args["signals"]), limit=MAX_PLOTTED)
        series = history_series(
            net.db, monitor, specs, PLOT_WIDTH_PX, start_s=args.get("start"), end_s=args.get("end")
        )
        return picture_result(series)

    def _tool_bus_status(self, net: Network, args: Mapping[str, Any]) -> Any:
        monitor = self._monitor(net)
        assert net.adapter is not None
        status = net.adapter.status()
        stats = monitor.stats(1.0)
        unknown = [key for key in stats.ids if net.db.message_for_frame(*key) is None]
        out: dict[str, Any] = {
            "state": "connected" if status.connected else "down",
            "bus": status.bus,
            "bus_state": status.bus_state,
            "frames_per_s": round(stats.frames_per_s, 1),
            "bus_load_percent": (
                None if stats.bus_load_percent is None else round(stats.bus_load_percent, 1)
            ),
            "frames_total": stats.frames_total,
            "error_frames": stats.error_frames,
            "ids_seen": len(stats.ids) + stats.unknown_ids_dropped,
            "ids_not_in_database": [frame_id_text(*key) for key in unknown[:MAX_LISTED]],
            "unknown_ids_seen": stats.unknown_ids_tracked + stats.unknown_ids_dropped,
            "messages_in_database": len(net.db.messages),
            "periodic_sends": net.sender.running(),
            **({"periodic_stopped": ended} if (ended := net.sender.ended()) else {}),
            "send_policy": self.policy.describe(),
        }
        if stats.frames_of_dropped_ids:
            # past the bound, ids outside the database get no per-id state (memory stays
            # bounded under a flood of invented ids); their frames are still in the history
            out["unknown_ids_dropped"] = stats.unknown_ids_dropped
            out["frames_of_dropped_ids"] = stats.frames_of_dropped_ids
            out["unknown_ids_tracked_max"] = stats.max_unknown_ids
        if stats.bus_load_percent is None:
            out["note"] = (
                "bus load needs the bus's bitrate: the driver was opened without one "
                "(bitrate= in Python, --bitrate on the command line)"
            )
        if status.last_error:
            out["last_error"] = status.last_error
        extra = {k: v for k, v in status.to_dict().items() if k not in _ADAPTER_FIELDS}
        if extra:  # e.g. a replayed capture: path, speed, progress, position_s
            out["source"] = extra
            if status.bus_state in ("replaying", "finished"):
                out["state"] = status.bus_state
        return out

    def _tool_decode_frame(self, net: Network, args: Mapping[str, Any]) -> Any:
        return net.reader.decode_frame(args["id"], args["data"])

    def _tool_send_message(self, net: Network, args: Mapping[str, Any]) -> Any:
        return net.sender.send_message(
            args["message"], args.get("signals") or {}, bool(args.get("dry_run", False))
        )

    def _tool_send_frame(self, net: Network, args: Mapping[str, Any]) -> Any:
        return net.sender.send_frame(args["id"], args["data"], args.get("extended"))

    def _tool_start_periodic(self, net: Network, args: Mapping[str, Any]) -> Any:
        return net.sender.start_periodic(
            args["message"], args.get("signals") or {}, args["period_ms"]
        )

    def _tool_stop_periodic(self, net: Network, args: Mapping[str, Any]) -> Any:
        return net.sender.stop_periodic(args["message"])

    def _monitor(self, net: Network) -> BusMonitor:
        monitor = net.reader.require_bus()  # NO_BUS when offline
        assert net.adapter is not None
        return monitor

    def close(self) -> None:
        for network in self.networks.values():
            network.close()


def _classic_only(network: Network) -> bool:
    """The network's bus carries classic frames only (socketcand); offline it carries none."""
    return network.adapter is not None and not network.adapter.carries_fd


def _is_fd(message: Any) -> bool:
    """A CAN FD message: flagged so, or longer than a classic frame's 8 bytes."""
    return bool(message.is_fd) or int(message.length) > 8
