"""A bench that asks with `elicitation/create` mid-call, written by hand over stdio (the
handshake versions only), for tests/mcp/test_consent_forwarding.py: its tool `press` asks
`n` questions about the press tagged `tag` (one by default), presses when every answer is
yes, and appends what happened to the file named by its first argument."""

from __future__ import annotations

import itertools
import json
import sys
import threading
from typing import Any

FORM = {"type": "object", "properties": {"approve": {"type": "boolean"}}, "required": ["approve"]}
TOOLS = [
    {
        "name": "press",
        "description": "Press a button.",
        "inputSchema": {
            "type": "object",
            "properties": {"tag": {"type": "string"}, "n": {"type": "integer"}},
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": True},
    }
]
LOG = sys.argv[1]
_lock = threading.Lock()
_ids = itertools.count(1000)
_waiting: dict[int, list[Any]] = {}


def send(message: dict[str, Any]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def note(line: str) -> None:
    with _lock, open(LOG, "a") as log:
        log.write(line + "\n")


def ask(question: str) -> bool:
    request = next(_ids)
    answered = threading.Event()
    _waiting[request] = [answered, None]
    params = {"message": question, "requestedSchema": FORM}
    send({"jsonrpc": "2.0", "id": request, "method": "elicitation/create", "params": params})
    answered.wait()
    result = (_waiting.pop(request)[1] or {}).get("result") or {}
    return result.get("action") == "accept" and (result.get("content") or {}).get("approve") is True


def press(request: Any, arguments: dict[str, Any]) -> None:
    tag = str(arguments.get("tag", ""))
    asked = [ask(f"Press {tag}? (question {k + 1})") for k in range(int(arguments.get("n", 1)))]
    done = all(asked)
    if done:
        note(f"PRESS {tag}")
    result = {"content": [{"type": "text", "text": "pressed" if done else "refused"}]}
    send({"jsonrpc": "2.0", "id": request, "result": {**result, "isError": not done}})


for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    method = message.get("method")
    if method is None and message.get("id") in _waiting:
        _waiting[message["id"]][1] = message
        _waiting[message["id"]][0].set()
    elif method == "initialize":
        info = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "asking-bench", "version": "1"}}  # fmt: skip
        send({"jsonrpc": "2.0", "id": message["id"], "result": info})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": TOOLS}})
    elif method == "tools/call":
        arguments = message["params"].get("arguments") or {}
        threading.Thread(target=press, args=(message["id"], arguments), daemon=True).start()
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
    elif method is not None and "id" in message:  # a newer request (server/discover, ...)
        missing = {"code": -32601, "message": f"{method} is not known here"}
        send({"jsonrpc": "2.0", "id": message["id"], "error": missing})
