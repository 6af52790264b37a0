"""`hwbridge chat --remote URL`: a bench served by `hwbridge mcp --http` (its own process,
with a bearer token), a model behind the loopback fake provider calling the bench's tools
under their labels; consent asked for a tool the bench is not trusted about."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator

import pytest

from hwbridge.cli.main import main
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, sse
from tests.mcp.conftest import start_http, stop
from tests.mcp.farm import free_port
from tests.mcp.test_remote_hostile import flood_url  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(60)

TOKEN = "chat-bench-token"
FRAME = {"id": "0x100", "data": "00 00 00 00 00 00 00 00"}


@pytest.fixture(scope="module")
def bench() -> Iterator[str]:
    process, url = start_http(
        "--bus",
        f"virtual:remote-chat-{uuid.uuid4().hex[:8]}",
        "--token-env",
        "HWB_CHAT_TOKEN",
        env={"HWB_CHAT_TOKEN": TOKEN},
    )
    yield url
    stop(process)


def chat(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeProvider,
    *options: str,
    stdin: str,
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    monkeypatch.setenv("HWBRIDGE_REMOTE_TOKEN", TOKEN)
    capsys.readouterr()
    code = main(
        [
            "chat",
            "--provider",
            "openai-compatible",
            "--base-url",
            fake.base_url,
            "--model",
            "local",
            *options,
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_remote_bench_s_tool_is_called_under_its_label_after_consent(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    bench: str,
) -> None:
    fake_openai.script(
        sse(P.openai_stream([], [("call_1", "bench1__decode_frame", FRAME)])),
        sse(P.openai_stream(["That frame is EngineData."])),
    )
    code, out, _ = chat(
        capsys, monkeypatch, fake_openai, "--remote", bench, stdin="What is frame 0x100?\ny\n"
    )
    assert code == 0, out
    assert "on remote bench1; " in out and "consent asked" in out
    assert "? allow bench1.decode_frame" in out  # not trusted: its marks are not believed
    assert "→ bench1.decode_frame" in out
    assert '✓ bench1.decode_frame {"message": "EngineData"' in out
    sent = [t["function"]["name"] for t in fake_openai.requests[0]["tools"]]
    assert "bench1__decode_frame" in sent and "bench1__read_signals" in sent
    assert not any(name.startswith("can") for name in sent)  # no local bus was named
    assert fake_openai.requests[1]["messages"][3]["role"] == "tool"


def test_a_trusted_bench_s_reads_run_without_a_question(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    bench: str,
) -> None:
    fake_openai.script(
        sse(P.openai_stream([], [("call_1", "lab__decode_frame", FRAME)])),
        sse(P.openai_stream(["EngineData."])),
    )
    code, out, _ = chat(
        capsys,
        monkeypatch,
        fake_openai,
        "--remote",
        f"lab={bench}",
        "--trust-remote",
        stdin="What is frame 0x100?\n",
    )
    assert code == 0, out
    assert "? allow" not in out and "✓ lab.decode_frame" in out


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (("--remote", "bench.example:8000"), "give http(s)://HOST:PORT/mcp"),
        (("--trust-remote",), "need --remote"),
        (("--remote", "http://127.0.0.1:9/mcp", "--remote-token-env", "HWB_NOT_SET"), "not set"),
        (("--remote", "a__b=http://127.0.0.1:9/mcp"), "may not contain __"),  # alias separator
    ],
)
def test_bad_remote_options_are_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    options: tuple[str, ...],
    words: str,
) -> None:
    monkeypatch.delenv("HWB_NOT_SET", raising=False)
    code, _, err = chat(capsys, monkeypatch, fake_openai, *options, stdin="")
    assert code == 2 and words in err, err


def test_a_bench_that_does_not_answer_exits_1_naming_it(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    code, _, err = chat(capsys, monkeypatch, fake_openai, "--remote", url, stdin="")
    assert code == 1 and url in err and "does not answer" in err


def test_a_bench_s_escape_sequences_never_reach_the_terminal(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    flood_url: str,  # noqa: F811  (the fixture imported above)
) -> None:
    """The bench's error text writes the clipboard (OSC 52), the title (OSC 0) and forges
    a green `ok` line over its own (erase, cursor up); its description is red: each
    control character is shown, none is written (issue 33, review 2 finding 4)."""
    fake_openai.script(
        sse(P.openai_stream([], [("call_1", "bench1__boom", {})])),
        sse(P.openai_stream(["ok"])),
    )
    code, out, err = chat(
        capsys, monkeypatch, fake_openai, "--remote", flood_url, stdin="go\ny\n/tools\n"
    )
    assert code == 0, out
    for control in ("\x1b", "\x07", "\x9b", "\x7f"):
        assert control not in out and control not in err
    assert "\\x1b]52;c;cHduZWQ=" in out and "\\x1b]0;TITLE-PWNED" in out  # shown
    assert "\\x1b[41mDESC-ESC" in out  # the description in /tools
