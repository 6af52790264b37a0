"""Multiplexed signals defined by hand: which of an id's signals share a frame, and the
checks that keep a defined layout one cantools reads.

An id has at most one multiplexer (cantools' `M`, simple multiplexing): one defined with
`is_multiplexer`, or the one the database's message already has. A page's signal
(`multiplexer_ids`, cantools' `m3`) is present only in frames whose multiplexer has one of
those raw values, so signals of different pages may share bits, and a signal of every
frame (the multiplexer too) shares bits with none.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hwbridge.core.models import ToolError
from hwbridge.discovery.frames import frame_key_text

if TYPE_CHECKING:
    from hwbridge.discovery.live.session import DefinedSignal

__all__ = [
    "MAX_MULTIPLEXER_BITS",
    "MAX_PAGE_IDS",
    "base_multiplexer",
    "check_alone",
    "check_pages",
    "multiplexer_name",
    "together",
    "where",
]

MAX_MULTIPLEXER_BITS = 16
"""A multiplexer's length at most (its values name pages, not quantities)."""
MAX_PAGE_IDS = 64
"""Pages one signal may be present in at most."""


def together(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> bool:
    """Two signals present in these pages (None: every frame) can be in one frame."""
    return a is None or b is None or bool(set(a) & set(b))


def where(ids: Iterable[int] | None) -> str:
    """' in page 3' for a page's signal; nothing for a signal of every frame."""
    if ids is None:
        return ""
    listed = sorted(ids)
    return f" in page{'s' if len(listed) > 1 else ''} {', '.join(map(str, listed))}"


def check_alone(signal: DefinedSignal) -> None:
    """INVALID_VALUE for a multiplexer or a page's signal that cannot be one, whatever else
    is defined."""
    ids = signal.multiplexer_ids
    if signal.is_multiplexer:
        if ids is not None:
            raise _invalid(
                "a multiplexer inside a page (extended multiplexing) is not supported: give"
                " is_multiplexer or multiplexer_ids, not both"
            )
        if signal.is_float or signal.signed:
            raise _invalid("a multiplexer is an unsigned integer: not signed, not a float")
        if signal.scale != 1 or signal.offset != 0:
            # cantools picks a page by the multiplexer's scaled value: multiplexer_ids name
            # raw values, so a scaled multiplexer would read every page from another's frames
            raise _invalid(
                "a multiplexer's raw value names its pages: give it no scale or offset"
                " (scale 1, offset 0)"
            )
        if signal.length > MAX_MULTIPLEXER_BITS:
            raise _invalid(f"a multiplexer has at most {MAX_MULTIPLEXER_BITS} bits")
    if ids is None:
        return
    if not ids or len(ids) > MAX_PAGE_IDS:
        raise _invalid(f"multiplexer_ids lists 1 to {MAX_PAGE_IDS} multiplexer values")
    if len(set(ids)) != len(ids) or min(ids) < 0:
        raise _invalid("multiplexer_ids are distinct raw values of the multiplexer (0 or more)")


def check_pages(
    signal: DefinedSignal, defined: Mapping[str, DefinedSignal], base: Any | None
) -> None:
    """INVALID_VALUE unless `signal`, among the signals `defined` before on its id and the
    database's message `base` of its id (if any), leaves one multiplexer whose values every
    page's signal names."""
    key = signal.key
    mine = [d for d in defined.values() if d.key == key and d.name != signal.name]
    theirs = _base_selector(base)
    defined_selector = next((d for d in mine if d.is_multiplexer), None)
    pages = [d for d in mine if d.multiplexer_ids is not None]
    before = defined.get(signal.name)
    if before is not None and before.is_multiplexer and before.key != key:
        _orphans(before, defined)
    if signal.is_multiplexer:
        if base is not None and theirs is not None:
            raise _invalid(
                f"{base.name}.{theirs.name} is already the multiplexer of"
                f" {frame_key_text(key)} in the database; name its values in multiplexer_ids"
            )
        if defined_selector is not None:
            raise _invalid(
                f"{defined_selector.name} is already the multiplexer of {frame_key_text(key)};"
                f" define {defined_selector.name} again to move it"
            )
        _fit(pages, signal.name, signal.length)
        return
    if before is not None and before.is_multiplexer:
        _orphans(before, defined)
    if signal.multiplexer_ids is None:
        return
    if defined_selector is not None:
        selector_name, selector_length = defined_selector.name, defined_selector.length
    elif base is not None and theirs is not None:
        if len([other for other in base.signals if other.is_multiplexer]) > 1:
            raise _invalid(
                f"{base.name} has several multiplexers in the database (extended"
                " multiplexing): which one a page's values name is not clear, so no page can"
                " be named here"
            )
        if float(theirs.scale) != 1 or float(theirs.offset) != 0:
            raise _invalid(
                f"{base.name}.{theirs.name}, the multiplexer of {frame_key_text(key)} in the"
                " database, is scaled: cantools picks its pages by the scaled value, not by"
                " the raw values multiplexer_ids name, so no page can be named for it here"
            )
        selector_name, selector_length = str(theirs.name), int(theirs.length)
    else:
        raise _invalid(
            f"{frame_key_text(key)} has no multiplexer: define it first (is_multiplexer=true,"
            " as survey_bus gave it), then its pages' signals with multiplexer_ids"
        )
    _fit([signal], selector_name, selector_length)


def _orphans(selector: DefinedSignal, defined: Mapping[str, DefinedSignal]) -> None:
    """INVALID_VALUE when pages' signals name the values of `selector`, which is to stop
    being their multiplexer."""
    named = sorted(d.name for d in defined.values() if d.key == selector.key and d.multiplexer_ids)
    if named:
        raise _invalid(
            f"{selector.name} is the multiplexer of {frame_key_text(selector.key)}, whose"
            f" pages' signals ({', '.join(named[:5])}) name its values; keep it a"
            " multiplexer there (is_multiplexer=true)"
        )


def _fit(pages: Iterable[DefinedSignal], selector: str, length: int) -> None:
    top = (1 << length) - 1
    for d in pages:
        ids = d.multiplexer_ids or ()
        if ids and max(ids) > top:
            raise _invalid(
                f"{d.name}'s multiplexer_ids {where(ids).strip()} do not fit in the"
                f" {length}-bit multiplexer {selector} (0 to {top})"
            )


def multiplexer_name(signals: Iterable[DefinedSignal], base: Any | None) -> str | None:
    """The multiplexer of an id's defined `signals`: one of them, or the database's."""
    signals = list(signals)
    found = next((d.name for d in signals if d.is_multiplexer), None)
    if found is None and any(d.multiplexer_ids is not None for d in signals):
        theirs = _base_selector(base)
        found = None if theirs is None else str(theirs.name)
    return found


def base_multiplexer(signals: Iterable[DefinedSignal], base: Any | None) -> list[Any]:
    """The database's multiplexer (a copy), when defined pages' signals name its values
    and the draft, which holds only defined signals, would otherwise lack it."""
    signals = list(signals)
    theirs = _base_selector(base)
    if theirs is None or not any(d.multiplexer_ids is not None for d in signals):
        return []
    return [copy.deepcopy(theirs)]


def _base_selector(base: Any | None) -> Any | None:
    if base is None:
        return None
    return next((s for s in base.signals if s.is_multiplexer), None)


def _invalid(text: str) -> ToolError:
    return ToolError("INVALID_VALUE", text)
