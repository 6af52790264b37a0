"""Ranked signal search: every signal scored by how well a question's words match it.

A question ("is the driver's seat belt fastened") is read as units: words, and phrases of
the vocabulary ("seat belt"); stopwords are dropped. Each unit is matched against every
signal's name, message name, unit, value labels and comment: the same word, a word of the
same concept (blinker ~ turn signal ~ `Blinker`), an unknown DBC abbreviation of it
(`Whl` for wheel), or a typo of it. A unit that matches few signals counts more than one
that matches many (inverse document frequency), so "seat belt" outweighs "driver". Names
equal to, starting with or containing the whole query come first, then the ranked rest;
a word that matches nothing only adds nothing, it never empties the list.

The index is built once per database (inverted lists per field), so a search touches only
the signals its words reach. The question is bounded: at most the first 64 words and 16
distinct units count, whatever its length.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hwbridge.can.database.values import SignalSpec
from hwbridge.can.database.vocabulary import (
    Vocabulary,
    name_words,
    query_words,
    stem,
    written_together,
)

__all__ = ["SignalIndex"]

_SEPARATORS = re.compile(r"[\s_\-.]+")
_COMMENT_CHARS = 160
_LABELS_LISTED = 12
_MAX_WORDS = 64
_MAX_UNITS = 16
_MAX_TEXT_WORDS = 400  # of a comment or of value labels, indexed
_MAX_NEAR = 24  # abbreviations/typos of one word kept
_NEAR_CACHE = 4096

# fields: (name, weight); the order is also the label's preference
_NAME, _MESSAGE, _UNIT, _LABELS, _COMMENT = range(5)
_FIELD_WEIGHT = (1.0, 0.45, 0.6, 0.3, 0.35)
_FIELD_LABEL = ("words", "message", "unit", "labels", "comment")

_EXACT = 1.0
_CONCEPT = 0.9
_PREFIX = 0.75
_ABBREVIATION = 0.65
_TYPO = 0.6
_PHRASE_PARTS = 0.85  # a phrase matched word by word, not as a whole
_KEEP = 0.2  # ranked results scoring less than this share of the best are left out
_WEAK = 1 / 3  # what a weak word ("vehicle", "status") counts
_DEMOTED = 0.7  # what a bookkeeping signal (counter, checksum) scores when not asked for
_STRONG = 0.5  # matches at least this good count in a unit's document frequency

_TIER_EXACT, _TIER_PREFIX, _TIER_SUBSTRING = 3, 2, 1
_TIER_LABEL = {_TIER_EXACT: "exact", _TIER_PREFIX: "prefix", _TIER_SUBSTRING: "substring"}


def _flat(text: str) -> str:
    return _SEPARATORS.sub("", text.lower())


def _osa(a: str, b: str, limit: int) -> int:
    """Edit distance with transpositions (optimal string alignment), or limit + 1 if more."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(c in it for c in short)


@dataclass(slots=True)
class _Unit:
    """One word or phrase of the question and what it may match."""

    stems: tuple[str, ...]
    keys: dict[str, float] = field(default_factory=dict)  # posting key -> match quality
    parts: tuple[_Unit, ...] = ()  # a phrase's words, matched one by one
    weight: float = 1.0


class SignalIndex:
    """Signals ranked by how well a question matches their name, message, unit, labels,
    comment. Built once per database and not changed afterwards, but for a bounded cache
    of the abbreviations and typos of words asked (plain dict updates: safe to share)."""

    __slots__ = (
        "_by_initial",
        "_demoted",
        "_entries",
        "_flat",
        "_max_flat",
        "_near_cache",
        "_postings",
        "_vocab",
        "_words",
    )

    def __init__(self, specs: Sequence[SignalSpec], vocabulary: Vocabulary | None = None) -> None:
        vocab = vocabulary or Vocabulary.load()
        self._vocab = vocab
        self._entries = tuple(specs)
        self._flat = [_flat(s.name) for s in self._entries]
        self._max_flat = max(map(len, self._flat), default=0)
        self._words: list[tuple[str, ...]] = []
        self._demoted: list[frozenset[str]] = []
        demote = {"c:" + c: c for c in vocab.demote}
        postings: tuple[dict[str, list[int]], ...] = tuple({} for _ in _FIELD_WEIGHT)
        seen_words: set[str] = set()
        message_keys: dict[str, set[str]] = {}
        for i, spec in enumerate(self._entries):
            words, joined = name_words(spec.name)
            stems = tuple(stem(w) for w in words)
            self._words.append(stems)
            seen_words.update(stems)
            seen_words.update(stem(j) for j in joined)
            keys = self._keys(stems, joined, singles=True)
            self._demoted.append(frozenset(c for k, c in demote.items() if k in keys))
            message = message_keys.get(spec.message)
            if message is None:
                m_words, m_joined = name_words(spec.message)
                m_stems = [stem(w) for w in m_words]
                seen_words.update(m_stems)
                message = message_keys[spec.message] = self._keys(m_stems, m_joined, singles=True)
            fields: list[Iterable[str]] = [keys, message, (), (), ()]
            if spec.unit:
                fields[_UNIT] = self._unit_keys(spec.unit)
            if spec.choices:
                labels = " ".join(dict.fromkeys(spec.choices.values()))
                fields[_LABELS] = self._text_keys(labels)
            if spec.comment:
                fields[_COMMENT] = self._text_keys(spec.comment)
            for posting, found in zip(postings, fields, strict=True):
                for key in found:
                    posting.setdefault(key, []).append(i)
        self._postings = postings
        by_initial: dict[str, list[str]] = {}
        for w in seen_words:
            if len(w) >= 2 and not vocab.known(w) and not w.isdigit():
                by_initial.setdefault(w[0], []).append(w)
        self._by_initial = {k: tuple(sorted(v)) for k, v in by_initial.items()}
        self._near_cache: dict[str, dict[str, float]] = {}

    # -- indexing ------------------------------------------------------------------------

    def _keys(self, stems: Sequence[str], joined: Iterable[str], *, singles: bool) -> set[str]:
        """Posting keys of a run of words: the words, their concepts, phrases they form."""
        vocab = self._vocab
        keys: set[str] = set()
        for s in stems:
            keys.add("w:" + s)
            if len(s) > 1 or singles:
                keys.update("c:" + c for c in vocab.concepts(s))
        for j in joined:
            s = stem(j)
            keys.add("w:" + s)
            keys.update("c:" + c for c in vocab.terms.get(s, ()))
        for phrase in vocab.phrases_in(stems):
            keys.add("c:" + phrase.concept)
        return keys

    def _text_keys(self, text: str) -> set[str]:
        """Keys of a comment or of value labels: its words but stopwords, and its phrases."""
        stems = [stem(w) for w in query_words(text)[:_MAX_TEXT_WORDS]]
        stops = self._vocab.stopwords
        keys = self._keys([s for s in stems if s not in stops], (), singles=False)
        keys.update("c:" + p.concept for p in self._vocab.phrases_in(stems))
        return keys

    def _unit_keys(self, unit: str) -> set[str]:
        flat = re.sub(r"[^a-z0-9]", "", unit.lower())
        known = self._vocab.terms.get(flat)
        if known:
            return {"w:" + flat, *("c:" + c for c in known)}
        return self._text_keys(unit) | {"w:" + flat}

    # -- the question --------------------------------------------------------------------

    def _units(self, query: str) -> list[_Unit]:
        vocab = self._vocab
        stems = [stem(w) for w in query_words(query)[:_MAX_WORDS]]
        units: list[_Unit] = []
        seen: set[tuple[str, ...]] = set()
        i = 0
        while i < len(stems) and len(units) < _MAX_UNITS:
            phrase = vocab.phrase_at(stems, i)
            if phrase is not None:
                words = tuple(stems[i : i + len(phrase.stems)])
                unit = _Unit(words, {"c:" + phrase.concept: _CONCEPT})
                unit.keys["w:" + "".join(words)] = _EXACT  # written together: "seatbelt"
                unit.parts = tuple(
                    self._word(w) for w in words if w not in vocab.stopwords and len(w) > 1
                )
                i += len(words)
            else:
                word = stems[i]
                i += 1
                if word in vocab.stopwords or len(word) < 2:
                    continue
                unit = self._word(word)
            if unit.stems not in seen:
                seen.add(unit.stems)
                units.append(unit)
        for joined in written_together(query, _MAX_WORDS):  # `km/h`, `degC` as one word too
            word = stem(joined)
            if len(units) < _MAX_UNITS and (word,) not in seen:
                seen.add((word,))
                units.append(self._word(word))
        if not units:  # a question of stopwords only: take its words as they are
            units = [self._word(s) for s in dict.fromkeys(stems) if s][:_MAX_UNITS]
        return units

    def _word(self, word: str) -> _Unit:
        vocab = self._vocab
        unit = _Unit((word,), {"w:" + word: _EXACT}, weight=_WEAK if word in vocab.weak else 1.0)
        concepts = vocab.concepts(word)
        for c in concepts:
            unit.keys["c:" + c] = _CONCEPT
        near = self._near(word)
        for w, quality in near.items():
            if w.startswith("c:"):
                if not concepts:
                    unit.keys.setdefault(w, quality)
            else:
                unit.keys.setdefault("w:" + w, quality)
        return unit

    def _near(self, word: str) -> dict[str, float]:
        """Database words that abbreviate or misspell `word`, and concepts of vocabulary
        terms it misspells, with their match quality (cached per word)."""
        cached = self._near_cache.get(word)
        if cached is not None:
            return cached
        found: dict[str, float] = {}
        n = len(word)
        if n >= 3:
            limit = 1 if n <= 7 else 2
            for token in self._by_initial.get(word[0], ()):
                if token == word:
                    continue
                short = len(token)
                if (short >= 4 or short >= 0.6 * n) and word.startswith(token):
                    found[token] = _PREFIX  # `temp` of temperature, `accel`, `pos` ...
                elif n >= 4 and token.startswith(word):
                    found[token] = _PREFIX
                elif n >= 4 and short >= 3 and short >= 0.5 * n and _subsequence(token, word):
                    found[token] = _ABBREVIATION  # `whl` of wheel, `strg` of steering
                elif n >= 4 and _osa(token, word, limit) <= limit:
                    found[token] = _TYPO
            if n >= 4 and not self._vocab.concepts(word):
                for term, concepts in self._vocab.terms.items():
                    if term[0] == word[0] and len(term) >= 4 and _osa(term, word, limit) <= limit:
                        for c in concepts:
                            found.setdefault("c:" + c, _TYPO)
        if len(found) > _MAX_NEAR:
            found = dict(heapq.nlargest(_MAX_NEAR, found.items(), key=lambda kv: kv[1]))
        if len(self._near_cache) < _NEAR_CACHE:
            self._near_cache[word] = found
        return found

    # -- scoring -------------------------------------------------------------------------

    def _match(self, unit: _Unit) -> dict[int, tuple[float, int]]:
        """entry -> (weighted quality, field) of the unit's best match in that entry."""
        best: dict[int, tuple[float, int]] = {}
        for f, weight in enumerate(_FIELD_WEIGHT):
            posting = self._postings[f]
            for key, quality in unit.keys.items():
                value = weight * quality
                for e in posting.get(key, ()):
                    current = best.get(e)
                    if current is None or value > current[0]:
                        best[e] = (value, f)
        if unit.parts:
            matched = [self._match(part) for part in unit.parts]
            for e in set().union(*matched):
                mean = sum(m.get(e, (0.0, 0))[0] for m in matched) / len(matched)
                value = _PHRASE_PARTS * mean
                current = best.get(e)
                if value > 0 and (current is None or value > current[0]):
                    field_of = min((m[e][1] for m in matched if e in m), default=_NAME)
                    best[e] = (value, field_of)
        return best

    def search(self, query: str, limit: int = 10) -> list[tuple[SignalSpec, str]]:
        """Up to `limit` (spec, how it matched) pairs, best first."""
        return self.search_counted(query, limit)[0]

    def search_counted(
        self, query: str, limit: int = 10
    ) -> tuple[list[tuple[SignalSpec, str]], int]:
        """`search`, and how many signals matched well enough to be ranked (of which the
        best `limit` are given)."""
        if limit <= 0 or not query.strip():
            return [], 0
        units = self._units(query)
        asked = {k[2:] for u in units for k in u.keys if k.startswith("c:")}
        n = len(self._entries)
        score: dict[int, float] = {}
        label: dict[int, tuple[int, bool]] = {}  # entry -> (best field, only typos in name)
        for unit in units:
            matched = self._match(unit)
            if not matched:
                continue
            strong = sum(1 for value, _ in matched.values() if value >= _STRONG)
            idf = unit.weight * math.log(1.0 + n / (strong or len(matched)))
            for e, (value, f) in matched.items():
                score[e] = score.get(e, 0.0) + idf * value
                old = label.get(e)
                typo = f == _NAME and value < _FIELD_WEIGHT[_NAME] * _ABBREVIATION
                if old is None or f < old[0]:
                    label[e] = (f, typo)
                elif f == old[0] == _NAME:
                    label[e] = (f, old[1] and typo)
        for e in score:
            if self._demoted[e] and not self._demoted[e] <= asked:
                score[e] *= _DEMOTED
        tiers = self._tiers(query)
        for e in tiers:
            score.setdefault(e, 0.0)
        if not score:
            return [], 0
        ranked_best = max((s for e, s in score.items() if e not in tiers), default=0.0)
        keep = _KEEP * ranked_best
        candidates = [(tiers.get(e, 0), s, e) for e, s in score.items() if e in tiers or s >= keep]
        wanted = {w for u in units for w in u.stems}
        top = heapq.nlargest(
            limit,
            candidates,
            key=lambda t: (
                t[0],
                round(t[1], 6),
                -self._unmatched(t[2], wanted),
                -len(self._flat[t[2]]),
            ),
        )
        out = []
        for tier, _, e in top:
            if tier:
                how = _TIER_LABEL[tier]
            else:
                f, typo = label[e]
                how = "fuzzy" if typo else _FIELD_LABEL[f]
            out.append((self._entries[e], how))
        return out, len(candidates)

    def _tiers(self, query: str) -> dict[int, int]:
        """Signals whose name equals, starts with or contains the whole query (ignoring case
        and separators)."""
        flat = _flat(query.strip())
        if not flat or len(flat) > self._max_flat:
            return {}
        lowered = query.strip().lower()
        tiers: dict[int, int] = {}
        for e, name in enumerate(self._flat):
            if name == flat or self._entries[e].name.lower() == lowered:
                tiers[e] = _TIER_EXACT
            elif name.startswith(flat):
                tiers[e] = _TIER_PREFIX
            elif len(flat) >= 3 and flat in name:
                tiers[e] = _TIER_SUBSTRING
        return tiers

    def _unmatched(self, e: int, wanted: set[str]) -> int:
        """How many words of the signal's name are not words of the question."""
        return sum(1 for w in self._words[e] if w not in wanted)

    def result(self, spec: SignalSpec, match: str) -> dict[str, Any]:
        """One search hit as JSON."""
        out: dict[str, Any] = {
            "signal": spec.name,
            "message": spec.message,
            "qualified": spec.qualified,
            "match": match,
        }
        if spec.unit:
            out["unit"] = spec.unit
        if spec.choices:
            out["labels"] = list(dict.fromkeys(spec.choices.values()))[:_LABELS_LISTED]
        if spec.comment:
            text = spec.comment
            out["comment"] = (
                text if len(text) <= _COMMENT_CHARS else text[: _COMMENT_CHARS - 1] + "…"
            )
        return out
