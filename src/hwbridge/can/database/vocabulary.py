"""The words of the field for signal search, read from prompts/vocabulary.toml.

People ask "is the left blinker on"; DBC authors write `TurnLghtLeftOn_B_Stat`,
`BH_Blinker_li` or `TURN_SIGNALS`. The vocabulary (data, not code) groups every way a
concept is written: English words and phrases, DBC abbreviations, German VW-group names.
This module reads it and turns words into what search compares: normalized stems and the
concepts they stand for, including compounds (`Radgeschw` = wheel + speed) split into
known parts.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = [
    "Phrase",
    "Vocabulary",
    "name_words",
    "query_words",
    "stem",
    "written_together",
]

_UMLAUTS = str.maketrans(
    {"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue"}
)
_PART = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SPLIT_MIN = 5  # shorter words are never split into parts
_PART_MIN = 3  # nor split into parts shorter than this
_COVERED = 0.75  # a split must explain this share of the word ...
_LONG_PART = 6  # ... unless one of its parts is at least this long
_PREFIX_MIN = 4  # `drehz` stands for `drehzahl`: a prefix this long of a term ...
_PREFIXED_MIN = 6  # ... at least this long


def _normalize(text: str) -> str:
    return text.translate(_UMLAUTS)


def stem(word: str) -> str:
    """A light English stem: braking/brakes/brake -> brak, pressed -> press, doors -> door
    (speed, spring and status stay as they are)."""
    if len(word) >= 7 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) >= 5 and word.endswith("ed") and not word.endswith("eed"):
        word = word[:-2]
    elif len(word) >= 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) >= 4 and word.endswith("e"):
        word = word[:-1]
    return word


def query_words(text: str) -> list[str]:
    """Lowercase words of a question: separators and camelCase split (`EngineSped`)."""
    return [w.lower() for part in _PART.findall(_normalize(text)) for w in _CAMEL.findall(part)]


def written_together(text: str, limit: int) -> list[str]:
    """Words of a question written as one (`km/h`, `degC`, `EngineSped`), lowercase and
    without separators, among its first `limit` whitespace-separated words."""
    out = []
    for chunk in text.split(maxsplit=limit)[:limit]:
        parts = _PART.findall(_normalize(chunk))
        if len(parts) > 1 or (parts and len(_CAMEL.findall(parts[0])) > 1):
            out.append("".join(parts).lower())
    return out


def name_words(text: str) -> tuple[list[str], list[str]]:
    """The lowercase words of a name, in order (separators and camelCase split), and the
    parts between separators that camelCase split further (`StW_AnglHP` -> [st, w, angl,
    hp] and [stw, anglhp]): `StW` is how Tesla abbreviates steering wheel."""
    words: list[str] = []
    joined: list[str] = []
    for part in _PART.findall(_normalize(text)):
        pieces = _CAMEL.findall(part)
        if len(pieces) > 1:
            joined.append(part.lower())
        words.extend(p.lower() for p in pieces)
    return words, joined


@dataclass(frozen=True, slots=True)
class Phrase:
    """Words written next to each other that together mean one concept ("turn signal")."""

    stems: tuple[str, ...]
    concept: str


@dataclass(frozen=True, slots=True)
class _Raw:
    stopwords: frozenset[str]
    weak: frozenset[str]  # stems of words that count less
    demote: frozenset[str]  # concepts of bookkeeping signals
    terms: Mapping[str, frozenset[str]]  # stem of a one-word term -> its concepts
    phrases: tuple[Phrase, ...]  # longest first


class Vocabulary:
    """Stopwords, concepts, phrases and compounds; `concepts(stem)` is what search uses."""

    __slots__ = (
        "_by_concept",
        "_by_word",
        "_cache",
        "_long_terms",
        "demote",
        "phrases",
        "stopwords",
        "terms",
        "weak",
    )

    def __init__(self, raw: _Raw) -> None:
        self.stopwords = raw.stopwords
        self.weak = raw.weak
        self.demote = raw.demote
        self.terms = raw.terms
        self.phrases = raw.phrases
        self._long_terms = tuple(sorted(t for t in raw.terms if len(t) >= _PREFIXED_MIN))
        self._cache: dict[str, frozenset[str]] = {}
        # phrases by what their first word may be: that word, or a word of its concepts
        by_word: dict[str, list[Phrase]] = {}
        by_concept: dict[str, list[Phrase]] = {}
        for phrase in raw.phrases:
            first = phrase.stems[0]
            by_word.setdefault(first, []).append(phrase)
            for concept in raw.terms.get(first, ()):
                by_concept.setdefault(concept, []).append(phrase)
        self._by_word = {k: tuple(v) for k, v in by_word.items()}
        self._by_concept = {k: tuple(v) for k, v in by_concept.items()}

    def same(self, word: str, part: str) -> bool:
        """A word matches a phrase's part: the same word, or a word of its concepts."""
        if word == part:
            return True
        wanted = self.terms.get(part)
        return bool(wanted and wanted & self.concepts(word))

    def phrase_at(self, stems: Sequence[str], i: int) -> Phrase | None:
        """The longest phrase written at `stems[i:]`, or None."""
        candidates = set(self._by_word.get(stems[i], ()))
        for concept in self.concepts(stems[i]):
            candidates.update(self._by_concept.get(concept, ()))
        best: Phrase | None = None
        for phrase in candidates:
            n = len(phrase.stems)
            if i + n > len(stems) or (best is not None and n <= len(best.stems)):
                continue
            if all(self.same(stems[i + k], phrase.stems[k]) for k in range(1, n)):
                best = phrase
        return best

    def phrases_in(self, stems: Sequence[str]) -> set[Phrase]:
        """Every phrase written somewhere in `stems` (each part a word or its concept)."""
        found: set[Phrase] = set()
        for i, word in enumerate(stems):
            candidates = set(self._by_word.get(word, ()))
            for concept in self.concepts(word):
                candidates.update(self._by_concept.get(concept, ()))
            for phrase in candidates:
                n = len(phrase.stems)
                if i + n <= len(stems) and all(
                    self.same(stems[i + k], phrase.stems[k]) for k in range(1, n)
                ):
                    found.add(phrase)
        return found

    @classmethod
    def from_toml(cls, data: Mapping[str, Any], source: str = "vocabulary") -> Vocabulary:
        return cls(_parse(data, source))

    @classmethod
    def load(cls, path: str | Path | None = None) -> Vocabulary:
        """The packaged vocabulary (cached), or the TOML file at `path`."""
        if path is None:
            return _packaged()
        path = Path(path)
        try:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise PromptPackError(f"{path}: cannot read the vocabulary: {exc}") from exc
        return cls.from_toml(data, str(path))

    def known(self, word_stem: str) -> bool:
        """True when the word is a term of the vocabulary itself (not a split or prefix)."""
        return word_stem in self.terms

    def concepts(self, word_stem: str) -> frozenset[str]:
        """The concepts a (stemmed) word stands for: as a term, as a compound of terms, or as
        the prefix of a long term (`drehz` -> drehzahl). Empty when unknown."""
        found = self._cache.get(word_stem)
        if found is None:
            found = self.terms.get(word_stem) or self._split(word_stem) or self._prefix(word_stem)
            if len(self._cache) < 100_000:
                self._cache[word_stem] = found
        return found

    def _prefix(self, word: str) -> frozenset[str]:
        if len(word) < _PREFIX_MIN:
            return frozenset()
        terms = self._long_terms
        i = _bisect_left(terms, word)
        found: set[str] = set()
        while i < len(terms) and terms[i].startswith(word):
            found |= self.terms[terms[i]]
            i += 1
        return frozenset(found) if len(found) <= 3 else frozenset()

    def _split(self, word: str) -> frozenset[str]:
        """Concepts of `word` read as known terms written together (German compounds,
        `SEATBELTLATCHED`); empty unless the parts explain most of it."""
        n = len(word)
        if n < _SPLIT_MIN:
            return frozenset()
        # best[i] = (characters covered, longest part, parts) for word[:i]
        best: list[tuple[int, int, tuple[str, ...]]] = [(0, 0, ())] * (n + 1)
        for end in range(1, n + 1):
            covered, longest, parts = best[end - 1]  # character end-1 left unexplained
            choice = (covered, longest, parts)
            for start in range(max(0, end - 24), end - _PART_MIN + 1):
                piece = word[start:end]
                key = piece if piece in self.terms else stem(piece)
                if key not in self.terms or (start == 0 and end == n):
                    continue
                prev_covered, prev_longest, prev_parts = best[start]
                option = (
                    prev_covered + end - start,
                    max(prev_longest, end - start),
                    (*prev_parts, key),
                )
                if option[:2] > choice[:2]:
                    choice = option
            best[end] = choice
        covered, longest, parts = best[n]
        if not parts or (covered < _COVERED * n and longest < _LONG_PART):
            return frozenset()
        out: set[str] = set()
        for part in parts:
            out |= self.terms[part]
        return frozenset(out)


def _bisect_left(items: tuple[str, ...], value: str) -> int:
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PromptPackError(f"{where} must be a list of strings")
    return value


def _parse(data: Mapping[str, Any], source: str) -> _Raw:
    unknown = set(data) - {"search", "concepts", "compounds"}
    if unknown:
        raise PromptPackError(f"{source}: unknown tables {sorted(unknown)}")
    search = dict(data.get("search", {}))
    unknown = set(search) - {"stopwords", "weak", "demote"}
    if unknown:
        raise PromptPackError(f"{source}: unknown keys in [search]: {sorted(unknown)}")

    def stems_of(key: str) -> frozenset[str]:
        listed = _strings(search.get(key, []), f"{source}: [search] {key}")
        return frozenset(stem(w) for s in listed for w in query_words(s))

    stopwords, weak = stems_of("stopwords"), stems_of("weak")
    terms: dict[str, set[str]] = {}
    phrases: list[Phrase] = []

    def add(term: str, concepts: Iterable[str]) -> None:
        words = [stem(w) for w in query_words(term)]
        if len(words) == 1:
            terms.setdefault(words[0], set()).update(concepts)
        elif words:
            phrases.extend(Phrase(tuple(words), c) for c in concepts)

    for concept, written in dict(data.get("concepts", {})).items():
        add(concept.replace("_", " "), [concept])
        for term in _strings(written, f"{source}: [concepts] {concept}"):
            add(term, [concept])
    concept_names = set(dict(data.get("concepts", {})))
    demote = frozenset(_strings(search.get("demote", []), f"{source}: [search] demote"))
    if demote - concept_names:
        raise PromptPackError(
            f"{source}: [search] demote names unknown concepts {sorted(demote - concept_names)}"
        )
    for word, parts in dict(data.get("compounds", {})).items():
        listed = _strings(parts, f"{source}: [compounds] {word}")
        missing = [p for p in listed if p not in concept_names]
        if missing:
            raise PromptPackError(f"{source}: [compounds] {word} names unknown concepts {missing}")
        add(word, listed)
    return _Raw(
        stopwords,
        weak,
        demote,
        MappingProxyType({k: frozenset(v) for k, v in terms.items()}),
        tuple(sorted(set(phrases), key=lambda p: (-len(p.stems), p.stems, p.concept))),
    )


@functools.cache
def _packaged() -> Vocabulary:
    return Vocabulary.load(packs_dir() / "vocabulary.toml")
