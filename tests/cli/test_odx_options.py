"""`--dids FILE`, `--odx FILE` and `--odx-variant NAME` on `inspect`, `mcp` and `chat` (issue 38,
item 2): the ECU's description becomes tools; a bad file is one clear usage line."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from firmware_sim.odx import write_engine_pdx
from hwbridge.cli.main import build_parser
from tests.cli.conftest import DEMO, Run

pytest.importorskip("odxtools")

DIDS = Path(__file__).resolve().parents[2] / "examples" / "engine_dids.toml"


def test_inspect_offers_the_services_of_the_description(
    run: Run, channel: str, tmp_path: Path
) -> None:
    from firmware_sim import VirtualVehicle

    pdx = write_engine_pdx(tmp_path)
    calls = "\n".join([
        "call Read_IdleSpeedTarget {}",
        'call uds_read_did {"ecu": "engine", "did": "IdleSpeedTarget"}',
    ]) + "\n"  # fmt: skip
    with VirtualVehicle(DEMO, channel=channel, drive=False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = run("inspect", "--obd", f"virtual:{channel}", "--odx", str(pdx),
                "--odx-variant", "HWB_ECM_0417", "--dids", str(DIDS), stdin=calls)  # fmt: skip
    assert r.code == 0, r.err
    read = r.out.split("hwbridge> call Read_IdleSpeedTarget", 1)[1].split("hwbridge>", 1)[0]
    assert '"IdleSpeedTarget": {' in read and '"value": 800' in read and '"rpm"' in read
    named = r.out.split("hwbridge> call uds_read_did", 1)[1]
    assert '"name": "IdleSpeedTarget"' in named and '"value": 800' in named


@pytest.mark.parametrize(
    ("option", "content", "says"),
    [
        ("--odx", b"not a zip", "--odx: "),
        ("--dids", b'[did.A]\ndid = 1\ntype = "uint9"\n', ":1: did.A.type: Input should be"),
    ],
)
def test_a_bad_file_is_a_usage_error(
    run: Run, channel: str, tmp_path: Path, option: str, content: bytes, says: str
) -> None:
    from firmware_sim import VirtualVehicle

    bad = tmp_path / ("bad.pdx" if option == "--odx" else "bad.toml")
    bad.write_bytes(content)
    with VirtualVehicle(DEMO, channel=channel, drive=False):
        r = run("inspect", "--obd", f"virtual:{channel}", option, str(bad))
    assert r.code == 2 and says in r.err and f"{option}: {bad}" in r.err, r.err
    assert r.err.count("\n") == 1


def test_the_options_need_what_they_describe(run: Run, tmp_path: Path) -> None:
    r = run("mcp", "--print-config", "--bus", "virtual:x", "--odx", "ecu.pdx")
    assert r.code == 2 and "--odx needs --obd" in r.err
    r = run("mcp", "--print-config", "--bus", "virtual:x", "--dids", "dids.toml")
    assert r.code == 2 and "--dids needs --obd" in r.err
    r = run("mcp", "--print-config", "--obd", "virtual:x", "--odx-variant", "HWB_ECM")
    assert r.code == 2 and "--odx-variant needs --odx" in r.err


def test_the_files_reach_the_printed_config(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_engine_pdx(tmp_path)
    (tmp_path / "dids.toml").write_text(DIDS.read_text())
    monkeypatch.chdir(tmp_path)
    r = run("mcp", "--print-config", "--obd", "virtual:garage", "--odx", "HWB_ECM_0417.pdx",
            "--odx-variant", "HWB_ECM", "--dids", "dids.toml")  # fmt: skip
    assert r.code == 0, r.err
    args = json.loads(r.out)["mcpServers"]["hwbridge"]["args"]
    at = args.index("--dids")
    assert args[at : at + 6] == [
        "--dids", str(tmp_path / "dids.toml"), "--odx", str(tmp_path / "HWB_ECM_0417.pdx"),
        "--odx-variant", "HWB_ECM",
    ]  # fmt: skip


def test_chat_mcp_and_inspect_take_the_options() -> None:
    parser = build_parser()
    for command in (["chat", "--provider", "ollama"], ["mcp"], ["inspect"]):
        args = parser.parse_args(
            [*command, "--obd", "virtual:x", "--odx", "e.pdx", "--odx-variant", "V", "--dids", "d"]
        )
        assert (args.odx, args.odx_variant, args.dids) == ("e.pdx", "V", "d")
