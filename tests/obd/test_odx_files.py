"""ODX descriptions (issue 38, item 2) are read within bounds, as DBC files are: a hostile PDX
(zip bomb, billion laughs, external entities, a huge file, too many members, deep nesting)
fails fast with a message naming the file and the member - read without a bus."""

from __future__ import annotations

import re
import struct
import time
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path

import pytest

from firmware_sim.odx import engine_odx_files, write_engine_pdx
from hwbridge.obd.database import odx as odx_module
from hwbridge.obd.database.odx import OdxError, load_odx

pytest.importorskip("odxtools")

FAST_S = 2.0  # every refusal below comes well within this, on a busy machine too


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    return write_engine_pdx(tmp_path)


def zipped(path: Path, members: Mapping[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def raw_zip(path: Path, name: str, deflated: bytes, size: int, crc: int = 0) -> Path:
    """A one-member zip written by hand: its directory declares `size` inflated bytes."""
    encoded = name.encode()
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(deflated), size, len(encoded), 0
    )
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(deflated), size,
        len(encoded), 0, 0, 0, 0, 0, 0,
    )  # fmt: skip
    body = local + encoded + deflated
    directory = central + encoded
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(directory), len(body), 0)
    path.write_bytes(body + directory + end)
    return path


def spaces(mib: int) -> bytes:
    """A raw deflate stream of `mib` MiB of spaces, about 1 KB a MiB: blocks flushed to a byte
    boundary with fresh history repeat as they are."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(b" " * 2**20) + packer.flush(zlib.Z_FULL_FLUSH)
    return block * mib + packer.flush()


def without_comparams() -> str:
    """The engine's diagnostic layers without the reference to the comparam subset."""
    return re.sub(r"<COMPARAM-REFS>.*?</COMPARAM-REFS>", "", engine_odx_files()["HWB_ECM.odx-d"])


def refused(path: Path, *says: str) -> OdxError:
    started = time.monotonic()
    with pytest.raises(OdxError) as error:
        load_odx(path)
    took = time.monotonic() - started
    assert took < FAST_S, took
    text = str(error.value)
    assert text.startswith(str(path)), text
    for said in says:
        assert said in text, text
    return error.value


@pytest.mark.filterwarnings("ignore:Warning. Unknown document fragment")
def test_the_simulated_engine_ecus_description_loads(engine: Path) -> None:
    description = load_odx(engine)
    assert set(description.variants()) == {"HWB_ECM_0417", "HWB_ECM"}
    variant = description.variant(None)  # the only ECU variant
    assert variant.short_name == "HWB_ECM_0417"
    assert variant.get_can_receive_id() == 0x7E0
    assert "Write_IdleSpeedTarget" in [s.short_name for s in variant.services]
    assert description.variant("HWB_ECM").short_name == "HWB_ECM"
    with pytest.raises(
        OdxError, match="has no variant 'HWB_TCM'; its variants: HWB_ECM_0417, HWB_ECM"
    ):
        description.variant("HWB_TCM")
    one = engine.parent / "HWB_ECM.odx-d"
    one.write_text(without_comparams())
    alone = load_odx(one).variant("HWB_ECM")  # one file: no CAN ids to say where it is
    assert alone.short_name == "HWB_ECM" and alone.get_can_receive_id() is None
    one.write_text(engine_odx_files()["HWB_ECM.odx-d"])
    with pytest.raises(OdxError, match=r"odxtools cannot use it: .*CP_UniqueRespIdTable"):
        load_odx(one)  # its comparam subset is in the PDX, not beside it


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    bomb = raw_zip(tmp_path / "bomb.pdx", "ecu.odx-d", spaces(1024), 2**30)
    assert bomb.stat().st_size < 2 * 2**20  # 1 GiB of XML "whitespace" in about 1 MB
    refused(bomb, "inflate to 1,073,741,824 bytes", "zip bomb")


def test_a_member_that_lies_about_its_size_gains_nothing(tmp_path: Path) -> None:
    liar = raw_zip(tmp_path / "liar.pdx", "ecu.odx-d", spaces(64), 4096)  # 64 MiB, says 4 KiB
    refused(liar, "ecu.odx-d")


def test_a_member_beyond_the_inflated_bound_is_cut_while_inflating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdx = zipped(tmp_path / "big.pdx", {"a.odx-d": "<ODX>" + " " * 4096 + "</ODX>"})
    monkeypatch.setattr(odx_module, "MAX_ODX_BYTES", 2048)
    refused(pdx, "at most 2,048 are read")
    with zipfile.ZipFile(pdx) as archive:
        infos = archive.infolist()
    real = infos[0].file_size

    def shrunk(self: zipfile.ZipFile) -> list[zipfile.ZipInfo]:  # a directory that lies
        for info in infos:
            info.file_size = 100
        return infos

    monkeypatch.setattr(odx_module, "MAX_ODX_BYTES", real - 1)
    monkeypatch.setattr(zipfile.ZipFile, "infolist", shrunk)
    refused(pdx, "a.odx-d")


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10))
    + "]>\n<ODX>&lol9;</ODX>"
)  # fmt: skip


@pytest.mark.parametrize(
    ("xml", "says"),
    [
        pytest.param(BILLION_LAUGHS, "document type declaration", id="billion-laughs"),
        pytest.param('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><ODX>&e;</ODX>',
                     "document type declaration", id="external-entity"),
        pytest.param('<!DOCTYPE ODX SYSTEM "http://example.invalid/odx.dtd"><ODX/>',
                     "document type declaration", id="external-dtd"),
        pytest.param("<a>" * 300 + "</a>" * 300, "more than 256 deep", id="deep"),
        pytest.param("<ODX><unclosed></ODX>", "not well-formed XML", id="broken"),
        pytest.param('<ODX MODEL-VERSION="2.2.0"><NOT-A-CATEGORY><SHORT-NAME>x</SHORT-NAME></NOT-A-CATEGORY></ODX>',
                     "odxtools cannot use it: Encountered unknown ODX category", id="not-odx"),
    ],
)  # fmt: skip
def test_hostile_xml_in_a_member_is_refused(tmp_path: Path, xml: str, says: str) -> None:
    pdx = zipped(tmp_path / "hostile.pdx", {"index.xml": "<CATALOG/>", "ecu.odx-d": xml})
    error = refused(pdx, says)
    assert error.member == "ecu.odx-d"


def test_element_count_and_parse_time_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdx = zipped(tmp_path / "many.pdx", {"ecu.odx-d": "<ODX>" + "<x/>" * 5000 + "</ODX>"})
    monkeypatch.setattr(odx_module, "MAX_ELEMENTS", 4000)
    refused(pdx, "more than 4,000 XML elements")
    monkeypatch.setattr(odx_module, "MAX_ELEMENTS", 1_000_000)
    with pytest.raises(OdxError, match=r"took more than 60 s to parse"):
        load_odx(pdx, limit_s=0.0)


def test_huge_files_and_odd_archives_are_refused(tmp_path: Path) -> None:
    huge = tmp_path / "huge.pdx"
    with huge.open("wb") as sparse:
        sparse.truncate(64 * 2**20 + 1)  # no disk used: a hole
    refused(huge, "67,108,865 bytes; an ODX description is read up to 67,108,864")
    members = {f"doc{i}.txt": b"" for i in range(4097)}
    refused(zipped(tmp_path / "crowd.pdx", members), "4,097 members; a PDX has at most 4,096")
    refused(zipped(tmp_path / "empty.pdx", {"readme.txt": "hi"}), "holds no ODX document")
    junk = tmp_path / "junk.pdx"
    junk.write_bytes(b"PK\x03\x04" + bytes(200))
    refused(junk, "not a readable zip")
    other = tmp_path / "ecu.xml"
    other.write_text("<ODX/>")
    refused(other, "neither a PDX")
    refused(tmp_path / "missing.pdx", "cannot be read")


def test_a_directory_too_long_to_read_is_refused_from_its_end_record(tmp_path: Path) -> None:
    """zipfile reads a zip's whole directory before its members can be counted (1.2 million
    entries in a 60 MB file: 5.4 s and 736 MB): the count the end record declares is read
    first, from the file's tail, ZIP64's too."""
    import struct

    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 60_000, 60_000, 46 * 60_000, 0, 0)
    declared = tmp_path / "declared.pdx"
    declared.write_bytes(bytes(1000) + end)
    refused(declared, "60,000 members; a PDX has at most 4,096")
    end64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 1_200_000, 1_200_000,
                        46 * 1_200_000, 1000)  # fmt: skip
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, 1000, 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    zip64 = tmp_path / "zip64.pdx"
    zip64.write_bytes(bytes(1000) + end64 + locator + end)
    refused(zip64, "1,200,000 members; a PDX has at most 4,096")


def test_members_that_are_not_odx_are_never_read(
    tmp_path: Path, engine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files: dict[str, str | bytes] = {**engine_odx_files(), "jobs.py": "raise SystemExit"}
    files["flash.bin"] = bytes(1000)
    pdx = zipped(tmp_path / "with_jobs.pdx", files)
    opened: list[str] = []
    original = zipfile.ZipFile.open

    def spy(
        self: zipfile.ZipFile, name: str | zipfile.ZipInfo, *args: object, **kw: object
    ) -> object:
        opened.append(name if isinstance(name, str) else name.filename)
        return original(self, name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    assert load_odx(pdx).variant(None).short_name == "HWB_ECM_0417"
    assert sorted(opened) == ["HWB_ECM.odx-d", "HWB_ISO_15765_2.odx-cs"]


def test_an_error_pickles_with_its_parts() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(OdxError("a.pdx", "is broken", "x.odx-d")))
    assert (error.path, error.member, str(error)) == (
        "a.pdx",
        "x.odx-d",
        "a.pdx (x.odx-d): is broken",
    )


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore")
def test_inheritance_that_odxtools_walks_without_end_is_cut_by_the_clock(tmp_path: Path) -> None:
    """A 40 KB description whose base variants each name their parent twice: odxtools walks
    every path up the inheritance, 2**n of them for n layers (n = 14 took 4 s, each one more
    doubles it). The element bound does not see it; the load's time bound must."""
    files = engine_odx_files()
    layers = "".join(
        f'<BASE-VARIANT ID="X.BV{i}"><SHORT-NAME>X{i}</SHORT-NAME><PARENT-REFS>'
        + f'<PARENT-REF ID-REF="{f"X.BV{i - 1}" if i else "ECM.BV"}" xsi:type="BASE-VARIANT-REF"/>'
        * 2
        + "</PARENT-REFS></BASE-VARIANT>"
        for i in range(40)
    )
    files["HWB_ECM.odx-d"] = files["HWB_ECM.odx-d"].replace(
        "</BASE-VARIANTS>", layers + "</BASE-VARIANTS>"
    )
    pdx = zipped(tmp_path / "diamonds.pdx", files)
    assert pdx.stat().st_size < 50_000
    started = time.monotonic()
    with pytest.raises(OdxError, match=r"took more than 1 s"):
        load_odx(pdx, limit_s=1.0)
    assert time.monotonic() - started < 1.0 + FAST_S
    assert load_odx(write_engine_pdx(tmp_path), limit_s=30).variant(None)  # still loads
