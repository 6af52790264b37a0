"""In-memory repairs for DBC text that cantools refuses although its intent is unambiguous.

Real DBC files (opendbc, exports from old tools) break the format in a few recurring ways.
Each repair here fixes one such defect on a token stream, keeps every line where it was (so
errors after a repair still point at the user's file), and records what it changed so the
loader can warn about it. The file on disk is never touched.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["Repair", "RepairResult", "repair_dbc"]

EXTENDED_FLAG = 0x80000000
_MAX_STANDARD_ID = 0x7FF
_EXTENDED_ID_MASK = 0x1FFFFFFF
# cantools drops this pseudo message (signals not assigned to a frame); its id is not a CAN id.
_INDEPENDENT_SIGNALS = "VECTOR__INDEPENDENT_SIG_MSG"

# The same token classes cantools' DBC tokenizer uses, so "identifier" means what it means there.
_TOKEN = re.compile(
    r"""(?P<SKIP>[ \r\n\t]+|//[^\n]*(?:\n|$))
       |(?P<NUMBER>[-+]?\d+\.?\d*(?:[eE][+-]?\d+)?)
       |(?P<WORD>[A-Za-z0-9_]+)
       |(?P<STRING>"(?:\\"|[^"])*?")
       |(?P<PUNCT>[()\[\],|@;:+-])
       |(?P<MISMATCH>.)""",
    re.VERBOSE | re.DOTALL,
)
_DIGITS = re.compile(r"\d+")
# Tokens after which a NUMBER is a message id (CM_ SG_ 12 ..., BA_ "x" BO_ 12 ..., VAL_ 12 ...).
_ID_PREFIXES = frozenset(
    {"BO_", "SG_", "VAL_", "SIG_VALTYPE_", "BO_TX_BU_", "SG_MUL_VAL_", "SIG_GROUP_"}
)


@dataclass(frozen=True, slots=True)
class Repair:
    """One change made to the text, with the line of the original file it concerns."""

    kind: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.detail}"


@dataclass(frozen=True, slots=True)
class RepairResult:
    """The repaired text, what was changed, and defects deliberately left alone (with why)."""

    text: str
    repairs: tuple[Repair, ...]
    renamed: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    refused: tuple[str, ...] = ()


@dataclass(slots=True)
class _Tok:
    kind: str  # NUMBER, WORD, STRING, PUNCT, MISMATCH
    text: str
    start: int
    end: int
    digit_led: bool = False  # a WORD cantools would split into NUMBER + WORD


@dataclass(slots=True)
class _MessageDef:
    dbc_id: int
    name: str
    id_tok: int  # index of the id token
    signals: set[str]


def _tokenize(text: str) -> list[_Tok]:
    """Tokens as cantools sees them, except `2017_5` stays one (digit-led) WORD."""
    toks: list[_Tok] = []
    for mo in _TOKEN.finditer(text):
        kind = mo.lastgroup
        if kind == "SKIP" or kind is None:
            continue
        value = mo.group()
        if kind == "PUNCT":
            kind = value
        prev = toks[-1] if toks else None
        if (
            kind == "WORD"
            and prev is not None
            and prev.end == mo.start()
            and prev.kind == "NUMBER"
            and _DIGITS.fullmatch(prev.text)
        ):
            toks[-1] = _Tok("WORD", prev.text + value, prev.start, mo.end(), digit_led=True)
            continue
        toks.append(_Tok(kind, value, mo.start(), mo.end()))
    return toks


class _Lines:
    """Offset -> 1-based line number."""

    def __init__(self, text: str) -> None:
        self._newlines = [m.start() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> int:
        return bisect.bisect_left(self._newlines, offset) + 1


class _Repairer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.line = _Lines(text)
        self.edits: dict[int, tuple[int, str]] = {}  # start -> (end, replacement)
        self.repairs: list[Repair] = []
        self.refused: list[str] = []
        self.renamed: dict[str, str] = {}
        self.messages: list[_MessageDef] = []
        self.id_map: dict[int, int] = {}
        self.ns_end = self._namespace_end()

    # -- helpers -------------------------------------------------------------------------

    def _namespace_end(self) -> int:
        """Index after the `NS_ :` keyword list, whose entries are names, not statements."""
        toks = self.toks
        for i, t in enumerate(toks):
            if t.text == "NS_" and self.is_(i + 1, ":"):
                j = i + 2
                while j < len(toks) and not self.is_(j + 1, ":"):
                    j += 1
                return j
        return 0

    def tok(self, i: int) -> _Tok | None:
        return self.toks[i] if 0 <= i < len(self.toks) else None

    def is_(self, i: int, *kinds: str) -> bool:
        t = self.tok(i)
        return t is not None and (t.kind in kinds or (t.kind == "WORD" and t.text in kinds))

    def add(self, kind: str, offset: int, detail: str) -> None:
        self.repairs.append(Repair(kind, self.line(offset), detail))

    def blank(self, start: int, end: int) -> None:
        """Remove text but keep its newlines so later line numbers do not move."""
        self.edits[start] = (end, "\n" * self.text.count("\n", start, end))

    def statement_end(self, i: int) -> int:
        """Index of the ';' closing the statement that starts at token i (or the last token)."""
        j = i + 1
        while j < len(self.toks) and self.toks[j].kind != ";":
            j += 1
        return min(j, len(self.toks) - 1)

    # -- passes --------------------------------------------------------------------------

    def scan(self) -> None:
        """Find message and signal definitions (BO_ <id> <name> : ... / SG_ <name> [mux] :)."""
        current: _MessageDef | None = None
        toks = self.toks
        for i, t in enumerate(toks):
            if t.kind != "WORD":
                continue
            if t.text == "BO_" and self.is_(i + 1, "NUMBER") and self.is_(i + 3, ":"):
                name_tok = toks[i + 2]
                try:
                    dbc_id = int(toks[i + 1].text)
                except ValueError:
                    current = None
                    continue
                current = _MessageDef(dbc_id, name_tok.text, i + 1, set())
                self.messages.append(current)
            elif t.text == "SG_" and current is not None and self.is_(i + 1, "WORD"):
                if self.is_(i + 2, ":") or (self.is_(i + 2, "WORD") and self.is_(i + 3, ":")):
                    current.signals.add(toks[i + 1].text)
            elif t.text in ("CM_", "BA_", "BA_DEF_", "VAL_", "VAL_TABLE_", "EV_"):
                current = None

    def digit_identifiers(self) -> None:
        words = {t.text for t in self.toks if t.kind == "WORD"}
        first: dict[str, _Tok] = {}
        counts: dict[str, int] = {}
        for t in self.toks:
            if not t.digit_led:
                continue
            new = self.renamed.get(t.text)
            if new is None:
                new = "_" + t.text
                while new in words:
                    new = "_" + new
                words.add(new)
                self.renamed[t.text] = new
                first[t.text] = t
            counts[t.text] = counts.get(t.text, 0) + 1
            self.edits[t.start] = (t.end, new)
            t.text = new
        for old, t in first.items():
            self.add(
                "digit_identifier",
                t.start,
                f"identifier {old!r} starts with a digit; renamed to {self.renamed[old]!r}"
                f" ({counts[old]} occurrence{'s' if counts[old] > 1 else ''})",
            )

    def _uses_gm_parameter_ids(self) -> bool:
        """True when the file declares GMLAN parameter ids (`UseGMParameterIDs` = 1)."""
        value: str | None = None
        toks = self.toks
        for i, t in enumerate(toks):
            if t.kind == "STRING" and t.text == '"UseGMParameterIDs"':
                head = self.tok(i - 1)
                nxt = self.tok(i + 1)
                if head is None or nxt is None or nxt.kind != "NUMBER":
                    continue
                if head.text == "BA_DEF_DEF_" and value is None:
                    value = nxt.text
                elif head.text == "BA_":
                    value = nxt.text
                    break
        return value is not None and value.strip("+") not in ("0", "0.0")

    def extended_ids(self) -> None:
        """Set bit 31 on ids that cannot be standard ids: the DBC marks extended frames so."""
        used = {m.dbc_id for m in self.messages}
        gm = None
        for m in self.messages:
            if m.name == _INDEPENDENT_SIGNALS or not _MAX_STANDARD_ID < m.dbc_id < EXTENDED_FLAG:
                continue
            if gm is None:
                gm = self._uses_gm_parameter_ids()
            if gm:
                self.refused.append(
                    f"message {m.name}: the file declares GMLAN parameter ids"
                    " (UseGMParameterIDs = 1), which are not CAN arbitration ids"
                )
                continue
            new = (m.dbc_id & _EXTENDED_ID_MASK) | EXTENDED_FLAG
            if new in used:
                self.refused.append(
                    f"message {m.name}: extended id 0x{new & _EXTENDED_ID_MASK:X} is already used"
                )
                continue
            used.add(new)
            self.id_map[m.dbc_id] = new
            at = self.toks[m.id_tok].start
            if m.dbc_id > _EXTENDED_ID_MASK:
                self.add(
                    "extended_id",
                    at,
                    f"message {m.name}: id 0x{m.dbc_id:X} fits neither 11 nor 29 bits and lacks"
                    " the extended flag (bit 31); loaded as extended id"
                    f" 0x{new & _EXTENDED_ID_MASK:X} (its low 29 bits)",
                )
            else:
                self.add(
                    "extended_id",
                    at,
                    f"message {m.name}: id 0x{m.dbc_id:X} is above 0x7FF but lacks the extended"
                    " flag (bit 31); loaded as an extended (29-bit) id",
                )
        if not self.id_map:
            return
        for i in self._id_token_indexes():
            t = self.toks[i]
            new_id = self.id_map.get(int(t.text))
            if new_id is not None:
                self.edits[t.start] = (t.end, str(new_id))

    def _id_token_indexes(self) -> Iterator[int]:
        toks = self.toks
        for i, t in enumerate(toks):
            if t.kind != "NUMBER" or not _DIGITS.fullmatch(t.text) or i == 0:
                continue
            prev = toks[i - 1]
            if prev.text in _ID_PREFIXES or (
                prev.kind == "WORD" and i >= 2 and toks[i - 2].text == "BU_BO_REL_"
            ):
                yield i

    def dangling_references(self) -> None:
        """Drop VAL_ / SIG_VALTYPE_ entries naming a message or signal that does not exist."""
        signals: dict[int, set[str]] = {}
        for m in self.messages:
            if m.name != _INDEPENDENT_SIGNALS:
                signals.setdefault(self.id_map.get(m.dbc_id, m.dbc_id), set()).update(m.signals)
        for i, t in enumerate(self.toks):
            if i < self.ns_end or t.kind != "WORD" or t.text not in ("VAL_", "SIG_VALTYPE_"):
                continue
            if not (self.is_(i + 1, "NUMBER") and self.is_(i + 2, "WORD")):
                continue  # VAL_ of an environment variable
            try:
                raw_id = int(self.toks[i + 1].text)
            except ValueError:
                continue
            name = self.toks[i + 2].text
            known = signals.get(self.id_map.get(raw_id, raw_id))
            if known is not None and name in known:
                continue
            why = f"message {raw_id} has no signal {name}" if known else f"no message {raw_id}"
            end = self.statement_end(i)
            self.blank(t.start, self.toks[end].end)
            kind = "dangling_choices" if t.text == "VAL_" else "dangling_signal_type"
            self.add(kind, t.start, f"removed {t.text} {raw_id} {name}: {why}")

    def missing_semicolons(self) -> None:
        """Close CM_ and VAL_ statements whose ';' is missing (the next keyword follows)."""
        toks = self.toks
        for i, t in enumerate(toks):
            if t.kind != "WORD" or i < self.ns_end:
                continue
            if t.text == "CM_":
                j = i + 1
                sel = self.tok(j)
                if sel is not None and sel.text in ("BO_", "BU_", "EV_"):
                    j += 2
                elif sel is not None and sel.text == "SG_":
                    j += 3
                last = j
            elif t.text == "VAL_" and self.is_(i + 1, "NUMBER", "WORD"):
                j = i + (3 if self.is_(i + 1, "NUMBER") else 2)
                while self.is_(j, "NUMBER") and self.is_(j + 1, "STRING"):
                    j += 2
                last = j - 1
                if t.start in self.edits:  # already removed as dangling
                    continue
            else:
                continue
            if t.text == "CM_" and not self.is_(last, "STRING"):
                continue
            nxt = self.tok(last + 1)
            if nxt is not None and nxt.kind == ";":
                continue
            end_tok = toks[last]
            self.edits[end_tok.end] = (end_tok.end, ";")
            self.add("missing_semicolon", end_tok.end, f"added the missing ';' closing {t.text}")

    def apply(self) -> str:
        out: list[str] = []
        pos = 0
        for start in sorted(self.edits):
            end, replacement = self.edits[start]
            if start < pos:
                continue  # inside a removed statement
            out.append(self.text[pos:start])
            out.append(replacement)
            pos = end
        out.append(self.text[pos:])
        return "".join(out)


def repair_dbc(text: str) -> RepairResult:
    """Fix the known DBC defects in `text`; the result lists every change with its line."""
    r = _Repairer(text)
    r.digit_identifiers()
    r.scan()
    r.extended_ids()
    r.dangling_references()
    r.missing_semicolons()
    repairs = tuple(sorted(r.repairs, key=lambda rep: rep.line))
    new_text = r.apply() if r.edits else text
    return RepairResult(new_text, repairs, MappingProxyType(dict(r.renamed)), tuple(r.refused))
