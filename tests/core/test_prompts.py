"""Prompt packs load, merge and fail early with clear errors."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hwbridge import PromptPackError, PromptStrategy, estimate_tokens
from tests.core.drivers import Thermostat

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["json", "xml", "compact"])
def test_packaged_packs_load(name: str) -> None:
    s = PromptStrategy.load(name)
    assert s.name == name
    assert "{tools}" not in Thermostat(prompt_strategy=s).get_driver_system_message()


def test_user_file_merges_over_the_default(tmp_path: Path) -> None:
    pack = tmp_path / "mine.toml"
    pack.write_text(
        '[retry]\ninvalid_arguments = "Nope: {problems} ({tool})."\n'
        '[healing.semicolons]\npattern = ";"\nreplacement = ","\n'
    )
    s = PromptStrategy.load(pack)
    assert s.pack.retry.invalid_arguments == "Nope: {problems} ({tool})."
    assert s.pack.text.system == PromptStrategy.load("json").pack.text.system  # kept
    assert [n for n, _ in s.healing_rules][-1] == "semicolons"  # new key added
    r = Thermostat(prompt_strategy=s).process_llm_response(
        '{"tool": "get_temperature", "arguments": {}}'
    )
    assert r.retry_prompt == "Nope: parameter 'room' is required (which room) (get_temperature)."


def test_user_file_can_extend_another_pack(tmp_path: Path) -> None:
    pack = tmp_path / "x.toml"
    pack.write_text('[meta]\nname = "mine"\nversion = "1.0.0"\nextends = "xml"\n')
    s = PromptStrategy.load(pack)
    assert s.name == "mine" and s.pack.render.tools_format == "xml"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[retry]\ninvalid_argumnets = "x"\n', "retry.invalid_argumnets: unknown key"),
        (
            '[text]\nresult = "{tool} {reslt}"\n',
            "text.result uses unknown placeholder(s) ['reslt']",
        ),
        ('[text]\nsystem = "no tools here"\n', "text.system must contain {tools}"),
        ('[render]\nresult_role = "robot"\n', "render.result_role"),
        ("[healing.bad]\npattern = '('\n", "not a valid regex"),
        ('[meta]\nname = "bare"\nversion = "1"\nextends = ""\n', "text: field required"),
        ("this is = not [toml", "is not valid TOML"),
    ],
)
def test_bad_packs_fail_at_load(tmp_path: Path, content: str, message: str) -> None:
    pack = tmp_path / "bad.toml"
    pack.write_text(content)
    with pytest.raises(PromptPackError) as err:
        PromptStrategy.load(pack)
    assert message in str(err.value)
    assert "bad.toml" in str(err.value)


def test_unknown_pack_name_and_missing_file() -> None:
    with pytest.raises(PromptPackError, match="packaged packs are json, xml, compact"):
        PromptStrategy.load("yaml")
    with pytest.raises(PromptPackError, match="does not exist"):
        PromptStrategy.load("/nowhere/pack.toml")


def test_overrides_reach_model_variants() -> None:
    s = PromptStrategy.load("json", overrides={"retry": {"not_executed": "Skipped {tool}."}})
    assert s.for_model("phi-3-mini").name == "compact"
    assert s.for_model("phi-3-mini").pack.retry.not_executed == "Skipped {tool}."
    assert s.for_model(None) is s


def test_token_estimate_is_conservative() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("x" * 350) == 100


def test_no_llm_prose_in_python_sources() -> None:
    sources = "\n".join(p.read_text() for p in (ROOT / "src").rglob("*.py"))
    for phrase in (
        "You can call",
        "Tool result of",
        "was not executed",
        "Available tools",
        "Please",
    ):
        assert phrase not in sources


def test_wheel_ships_the_prompt_packs(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
    )
    [wheel] = tmp_path.glob("mcs_hwbridge-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for pack in ("json", "xml", "compact"):
        assert f"hwbridge/prompts/{pack}.toml" in names
    assert "hwbridge/prompts/vocabulary.toml" in names  # signal search's words
