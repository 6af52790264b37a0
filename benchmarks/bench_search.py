"""`search_signals` on questions people ask: top-5 hit rate and time per query.

The questions (benchmarks/search_queries.toml) were written, with the signals that answer
them, before the search was tuned; every third one is held out and was never looked at
while tuning. A question is a hit when one of its accepted signals is among the first five
results. The goal of the issue: at least 95%. The time per query is measured on
ford_lincoln_base_pt.dbc (2,150 signals), the largest database, with the search index
already built (it is built once, on the first search).
"""

from __future__ import annotations

import fnmatch
import time
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path

from hwbridge.can.database.database import CanDatabase

ROOT = Path(__file__).resolve().parents[1]
OPENDBC = ROOT.parent / "shared" / "data" / "opendbc"
QUERIES = Path(__file__).resolve().parent / "search_queries.toml"
TOP = 5
GOAL = 0.95
TIMED_FILE = "ford_lincoln_base_pt.dbc"
TIMING_ROUNDS = 20


@dataclass(frozen=True)
class Question:
    dbc: str
    text: str
    accept: tuple[str, ...]
    held_out: bool


def questions() -> list[Question]:
    with QUERIES.open("rb") as f:
        data = tomllib.load(f)
    return [
        Question(q["dbc"], q["q"], tuple(q["accept"]), held_out=i % 3 == 2)
        for i, q in enumerate(data["query"])
    ]


def hit(db: CanDatabase, question: Question) -> tuple[bool, list[str]]:
    found = [h["qualified"] for h in db.search_signals(question.text, limit=TOP)]
    ok = any(fnmatch.fnmatchcase(name, p) for name in found for p in question.accept)
    return ok, found


def main() -> None:
    warnings.simplefilter("ignore")  # repair warnings of the files loaded
    asked = questions()
    dbs = {name: CanDatabase.load(OPENDBC / name) for name in sorted({q.dbc for q in asked})}
    results = {False: [0, 0, 0], True: [0, 0, 0]}  # held_out -> [hits, total, empty]
    misses: list[str] = []
    for question in asked:
        ok, found = hit(dbs[question.dbc], question)
        tally = results[question.held_out]
        tally[0] += ok
        tally[1] += 1
        tally[2] += not found
        if not ok and not question.held_out:
            misses.append(f"  {question.dbc}: {question.text!r} -> {found or 'nothing'}")
    print(f"{len(asked)} questions over {len(dbs)} opendbc files; hit = an accepted signal in")
    print(f"the top {TOP}; goal >= {GOAL:.0%}")
    for held_out, label in ((False, "tuned"), (True, "held out (never tuned on)")):
        hits, total, empty = results[held_out]
        verdict = "ok" if hits / total >= GOAL else "MISSED"
        print(
            f"{label}: {hits}/{total} = {hits / total:.1%} top-{TOP} hits,"
            f" {empty} with no result [{verdict}]"
        )
    hits = results[False][0] + results[True][0]
    print(f"all: {hits}/{len(asked)} = {hits / len(asked):.1%}")
    if misses:
        print("misses among the tuned questions:")
        print("\n".join(misses))

    db = dbs[TIMED_FILE]
    timed = [q.text for q in asked if q.dbc == TIMED_FILE]
    start = time.perf_counter()
    for _ in range(TIMING_ROUNDS):
        for text in timed:
            db.search_signals(text, limit=10)
    per_query = (time.perf_counter() - start) / (TIMING_ROUNDS * len(timed))
    long_query = " ".join(["vehicle speed steering wheel angle brake pedal"] * 500)  # ~24 KB
    start = time.perf_counter()
    db.search_signals(long_query, limit=10)
    long_s = time.perf_counter() - start
    print(
        f"time per query on {TIMED_FILE} ({sum(len(m.signals) for m in db.messages)} signals):"
        f" {per_query * 1000:.2f} ms (mean of {len(timed)} questions x {TIMING_ROUNDS});"
        f" a {len(long_query) // 1000} KB query: {long_s * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
