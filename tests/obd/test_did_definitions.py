"""DID definitions (issue 38, item 2): a user's TOML file of DIDs, checked with clear errors,
turned into typed values both ways - parsed without a bus."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.core.models import ToolError
from hwbridge.obd.database.did_definitions import (
    DESCRIBED_CHARS,
    MAX_CHOICES,
    DidDefinitionError,
    did_definitions_schema,
    load_did_definitions,
    parse_did_definitions,
)
from hwbridge.obd.tools.did_values import DefinedDidValues, parse_data_identifier

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "engine_dids.toml"

DEFINITIONS = """
[did.IdleSpeedTarget]
did = 0x0101
type = "uint16"
unit = "rpm"
range = [600, 1000]
writable = true

[did.CoolantTemperature]
did = "F405"
type = "uint8"
offset = -40
unit = "degC"

[did.FanMode]
did = "0120"
type = "uint8"
choices = { 0 = "off", 1 = "low", 2 = "high" }
writable = true

[did.Trim]
did = 0x0130
type = "int16"
scale = 0.1
unit = "%"
range = [-25, 25]
writable = true

[did.Gain]
did = 0x0131
type = "float32"
writable = true

[did.WorkshopCode]
did = 0xF198
type = "ascii"
length = 6
writable = true

[did.Blob]
did = 0x0140
type = "bytes"
writable = true
"""
DIDS = parse_did_definitions(DEFINITIONS, "vehicle.toml")


def test_the_example_file_loads_and_matches_its_schema() -> None:
    dids = load_did_definitions(EXAMPLE)
    assert dids.find("IdleSpeedTarget") is not None
    schema = did_definitions_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    import tomllib

    jsonschema.validate(tomllib.loads(EXAMPLE.read_text()), schema)
    assert "uint16" in schema["$defs"]["DidDefinition"]["properties"]["type"]["enum"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"did": {"A": {"did": "F1G0", "type": "uint8"}}}, schema)


def test_values_both_ways_by_name() -> None:
    idle = DIDS.find("idlespeedtarget")
    assert idle is not None and DIDS.find("0101") is idle and DIDS.find(0x0101) is idle
    assert idle.encode(950) == b"\x03\xb6" and idle.encode("950") == b"\x03\xb6"
    assert idle.decode(b"\x03\xb6") == {
        "did": "0101", "name": "IdleSpeedTarget", "value": 950, "unit": "rpm",
        "raw_value": 950, "raw": "03 B6",
    }  # fmt: skip
    coolant = DIDS.find("CoolantTemperature")
    assert coolant is not None and coolant.decode(b"\x7a")["value"] == 82
    fan = DIDS.find("FanMode")
    assert fan is not None and fan.encode("High") == b"\x02"
    assert fan.decode(b"\x01") | {"label": "low", "value": 1} == fan.decode(b"\x01")
    trim = DIDS.find("Trim")
    assert trim is not None and trim.encode(-2.5) == (-25).to_bytes(2, "big", signed=True)
    assert trim.decode((-25).to_bytes(2, "big", signed=True))["value"] == -2.5
    code = DIDS.find("WorkshopCode")
    assert code is not None and code.encode("AB12") == b"AB12  "
    assert code.decode(b"AB12  ")["value"] == "AB12"
    blob = DIDS.find("Blob")
    assert blob is not None and blob.encode("01 02 0A") == b"\x01\x02\x0a"
    short = idle.decode(b"\x03")
    assert "value" not in short and "1 bytes" in short["note"] and short["raw"] == "03"
    assert parse_data_identifier("IdleSpeedTarget", DIDS) == 0x0101
    assert parse_data_identifier("VIN", DIDS) == 0xF190  # the standard's names still work


def test_refusals_say_what_is_wrong_before_anything_is_sent() -> None:
    idle = DIDS.find("IdleSpeedTarget")
    assert idle is not None
    for value, code, says in [
        (1200, "OUT_OF_RANGE", "IdleSpeedTarget is 600 to 1000 rpm; 1200 is out of range"),
        (599.4, "OUT_OF_RANGE", "599.4 is out of range"),
        ("fast", "INVALID_VALUE", "takes a number"),
        (True, "INVALID_VALUE", "takes a number"),
        (math.nan, "INVALID_VALUE", "finite"),
    ]:
        with pytest.raises(ToolError) as refused:
            idle.encode(value)
        assert refused.value.code == code and says in refused.value.message
    fan = DIDS.find("FanMode")
    assert fan is not None
    with pytest.raises(ToolError, match="one of off, low, high"):
        fan.encode("turbo")
    values = DefinedDidValues(DIDS)
    with pytest.raises(ToolError) as refused:
        values.encode(0xF405, 90)  # CoolantTemperature is not writable
    assert refused.value.code == "NOT_WRITABLE" and "vehicle.toml" in refused.value.message
    assert values.encode(0x0999, "02BC") == b"\x02\xbc"  # an undefined DID: hex bytes


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[did.A]\ndid = 1\ntype = "uint9"\n', "vehicle.toml:1: did.A.type: Input should be"),
        ('[did.A]\ndid = 1\ntype = "uint8"\n\n[did.B]\ndid = 2\ntype = "uint8"\nrange = [0, 300]\n',
         "vehicle.toml:5: did.B: Value error, range [0, 300] is beyond what a uint8"),
        ('[did.A]\ndid = 1\ntype = "uint8"\n[did.B]\ndid = "0001"\ntype = "int8"\n',
         "vehicle.toml:4: did.B: DID 0001 is defined twice (also as A)"),
        ('[did.Idle]\ndid = 1\ntype = "uint8"\n[did.IDLE]\ndid = 2\ntype = "uint8"\n',
         "differs from Idle by case alone"),
        ('[did."2bad"]\ndid = 1\ntype = "uint8"\n', "did.2bad.[key]: String should match"),
        ('[did.A]\ndid = 0x10000\ntype = "uint8"\n', "did.A.did: Input should be less than"),
        ('[did.A]\ndid = 1\ntype = "ascii"\nrange = [0, 1]\n', "give length instead"),
        ('[did.A]\ndid = 1\ntype = "uint8"\nscale = 0\n', "scale must be a finite number"),
        ('[did.A]\ndid = 1\ntype = "uint8"\nchoices = { x = "a" }\n', "not an integer"),
        ('[did.A]\ndid = 1\ntype = "uint8"\nunit = "r\\npm"\n', "did.A.unit"),
        ('[did.A]\ndid = 1\ntype = "uint8"\nwritable = "yes"\n', "did.A.writable"),
        ("[did]\n", "did: Dictionary should have at least 1 item"),
        ("did = [", "vehicle.toml: not valid TOML"),
        ('[did.F190]\ndid = 0xF15A\ntype = "uint8"\n',
         "vehicle.toml:1: did.F190: the name reads as the DID F190"),
        ('[did.A]\ndid = 1\ntype = "uint8"\n[did.beef]\ndid = 2\ntype = "uint8"\n',
         "vehicle.toml:4: did.beef: the name reads as the DID BEEF"),
    ],
)  # fmt: skip
def test_a_bad_file_names_the_file_the_line_and_the_entry(text: str, says: str) -> None:
    with pytest.raises(DidDefinitionError) as error:
        parse_did_definitions(text, "vehicle.toml")
    assert says in str(error.value)


def test_unreadable_and_oversized_files(tmp_path: Path) -> None:
    with pytest.raises(DidDefinitionError, match="cannot be read"):
        load_did_definitions(tmp_path / "missing.toml")
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * 1_000_001)
    with pytest.raises(DidDefinitionError, match="at most 1,000,000"):
        load_did_definitions(big)
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b"# \xe9\n")
    with pytest.raises(DidDefinitionError, match="not UTF-8"):
        load_did_definitions(latin)


numbers = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
)


@settings(deadline=None)
@given(st.sampled_from(["IdleSpeedTarget", "CoolantTemperature", "FanMode", "Trim", "Gain"]),
       numbers)  # fmt: skip
def test_any_value_is_encoded_within_range_or_refused(name: str, value: Any) -> None:
    defined = DIDS.find(name)
    assert defined is not None
    refusal: ToolError | None = None
    try:
        data = defined.encode(value)
    except ToolError as exc:
        refusal = exc
    if refusal is not None:
        assert refusal.code in ("INVALID_VALUE", "OUT_OF_RANGE") and refusal.message
        return
    assert len(data) == defined.size()
    decoded = defined.decode(data)
    low, high = defined.spec.physical_range()
    assert low <= decoded["value"] <= high
    if isinstance(value, int | float) and not isinstance(value, bool) and name != "Gain":
        assert abs(decoded["value"] - value) <= defined.spec.scale / 2 + 1e-9


@settings(deadline=None)  # a busy 2-core machine: the first example pays for the imports
@given(st.binary(max_size=8))
def test_any_bytes_decode_to_json(data: bytes) -> None:
    for defined in DIDS.by_did.values():
        decoded = defined.decode(data)
        json.dumps(decoded, allow_nan=False)  # JSON-safe, whatever the ECU sent
        assert decoded["raw"] == data.hex(" ").upper()


def test_a_hostile_file_fails_fast_with_the_files_name(tmp_path: Path) -> None:
    """Within the 1 MB bound: thousands of bad entries (the line of each was looked up in the
    whole text, 20 s for 300 KB), nesting past Python's recursion limit (a RecursionError
    that named nothing), an endless file (/dev/zero was read whole, without end)."""
    import time

    many = "".join(
        f'[did.N{i}]\ndid = 1\ntype = "x"\nscale = "a"\noffset = "b"\nunit = 1\nwritable = 2\n'
        for i in range(4096)
    )
    started = time.monotonic()
    with pytest.raises(DidDefinitionError, match=r"^vehicle.toml:1: did.N0.type: .* more$"):
        parse_did_definitions(many, "vehicle.toml")
    assert time.monotonic() - started < 5
    with pytest.raises(DidDefinitionError, match=r"^vehicle\.toml: nests arrays"):
        parse_did_definitions("a = " + "[" * 5000 + "]" * 5000, "vehicle.toml")
    key = "1" * 5000
    with pytest.raises(DidDefinitionError) as error:
        parse_did_definitions(f'[did.A]\ndid = 1\ntype = "uint8"\nchoices = {{ "{key}" = "x" }}\n')
    assert len(str(error.value)) < 300
    endless = Path("/dev/zero")
    if endless.exists():
        with pytest.raises(DidDefinitionError, match="at most 1,000,000"):
            load_did_definitions(endless)


def test_a_file_cannot_fill_the_prompt() -> None:
    """Within the 1 MB bound a file could put a megabyte into the tools' descriptions, sent
    to the model at every turn: they show the first DIDs up to a budget and count the rest,
    a DID shows its first labels, and more labels than a byte holds is refused."""
    labels = "".join(f'{k} = "label number {k:03}"\n' for k in range(256))
    many = "".join(
        f'[did.Defined_{i}]\ndid = {0x1000 + i}\ntype = "uint8"\n[did.Defined_{i}.choices]\n{labels}'
        for i in range(150)
    )
    definitions = parse_did_definitions(many, "vehicle.toml")
    described = definitions.describe()
    assert len(described) <= DESCRIBED_CHARS + 40
    assert described.endswith("more defined DIDs") and "(256 labels)" in described
    assert definitions.find("Defined_149") is not None  # past the description, still by name
    too_many = "".join(f'{k} = "l{k}"\n' for k in range(MAX_CHOICES + 1))
    with pytest.raises(DidDefinitionError, match="choices"):
        parse_did_definitions(f'[did.A]\ndid = 1\ntype = "uint16"\n[did.A.choices]\n{too_many}')
