"""Every block a page marks `<!-- produced: NAME -->` is what NAME's program prints now, and
the pictures of docs/_static are what it draws: made again by tests/docs_produced.py (the
simulated vehicle on a SimulatedClock, the tests' loopback model), so none can go stale.
`python -m tests.docs_produced --write` writes them again after a change."""

from __future__ import annotations

import html
import re

import pytest

from tests.docs_pages import Block, blocks, pages, text
from tests.docs_produced import PRODUCERS, STATIC, Unavailable, marked, shown_block

pytestmark = pytest.mark.live  # the chat session runs the simulated vehicle in real time

FIX = "run `python -m tests.docs_produced --write {name}` and look at the change"


def test_every_mark_names_a_producer_and_every_producer_is_shown() -> None:
    places = marked()
    assert set(places) <= set(PRODUCERS), set(places) - set(PRODUCERS)
    shown_in_pages = {"evidence"}  # a page links it (docs/discovery.md), no block
    assert set(PRODUCERS) - set(places) <= shown_in_pages


# processes; real-time cars (an ELM327, 2 s recorded, 20 s of a live discovery); opendbc's
# databases loaded by cantools to match a drive (2 s of CPU)
SLOW = {"farm", "obd-session", "record", "live-discovery", "match-known", "match-known-json"}
RUN_ELSEWHERE = {"demo": "tests/test_readme.py::test_demo_runs_to_the_end"}  # once: 11 s


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
        for n in PRODUCERS
        if n not in RUN_ELSEWHERE
    ],
)
def test_what_the_docs_show_is_what_the_program_makes(name: str) -> None:
    producer = PRODUCERS[name]
    try:
        made = producer.make()
    except Unavailable as why:  # ../shared's data or an optional package is not here
        pytest.skip(str(why))
    for page, line in marked().get(name, []):
        assert producer.mask(shown_block(page, line)) == producer.mask(made.text), (
            f"{page}:{line} is stale: " + FIX.format(name=name)
        )
    for file, content in made.files.items():
        committed = (STATIC / file).read_text()
        if file.endswith(".svg"):
            # rich draws it: its markup may change with rich, the screen it shows may not
            words = set(re.findall(r"[\w.,%/-]+", html.unescape(committed)))
            wanted = set(re.findall(r"[\w.,%/-]+", made.text))
            assert wanted <= words, f"docs/_static/{file} is stale: " + FIX.format(name=name)
        else:
            assert committed == content, f"docs/_static/{file} is stale: " + FIX.format(name=name)


def test_the_pictures_are_on_their_pages() -> None:
    assert "_static/monitor.svg" in text("docs/monitor.md")
    assert "_static/evidence.html" in text("docs/discovery.md")


# Blocks that show a program's output and are neither produced nor a `prints` block: each with
# why. Keyed by page and the block's first line, so that moving a block keeps its reason.
NOT_PRODUCED: dict[tuple[str, str], str] = {}
# Plain blocks that no program printed (drawn or written by hand), keyed the same way: every
# other plain block of a page is produced, or a `prints` block, or listed above.
HAND_WRITTEN = {
    ("docs/layout.md", "cli "): "the layers drawn by hand; .ci/check_layers.py checks the code",
    ("docs/layout.md", "src/hwbridge/"): "the packages' map, written by hand",
}


def _listed(page: str, block: Block, listed: dict[tuple[str, str], str]) -> bool:
    first = block.code.lstrip().split("\n", 1)[0]
    return any(page == p and first.startswith(start) for p, start in listed)


def _directive(page: str, block: Block) -> bool:
    """A MyST directive (```{toctree}, ```{eval-rst}): Sphinx's input, not a block shown."""
    return text(page).splitlines()[block.line - 1].lstrip().startswith("```{")


def test_every_output_shown_is_produced_or_printed_by_an_example() -> None:
    """Every plain block a page shows (a transcript, a table a command printed, a part of a
    report or of a draft) must be made by its program: marked `produced`, or the exact
    `prints` block of tests/test_docs_examples.py, or listed above with why not. A block
    that starts as neither a command nor its output did slip past an older rule that looked
    for `$ ` and `hwbridge` (a discovery table, a draft DBC's lines)."""
    unproduced = []
    for page in pages():
        found = blocks(page)
        for index, block in enumerate(found):
            if block.language not in ("", "text") or block.mark == "produced":
                continue
            if index and found[index - 1].printed == block.code:
                continue  # a `prints` block: run and compared by tests/test_docs_examples.py
            if _directive(page, block) or _listed(page, block, NOT_PRODUCED | HAND_WRITTEN):
                continue
            first = block.code.lstrip().split("\n", 1)[0]
            unproduced.append(f"{block.name}: {first[:60]}")
    assert not unproduced, (
        "mark these `<!-- produced: NAME -->` (tests/docs_produced.py), or list them above with"
        " why not:\n" + "\n".join(unproduced)
    )


def test_every_reason_not_to_produce_names_a_block_still_shown() -> None:
    for page, start in NOT_PRODUCED | HAND_WRITTEN:
        assert any(b.code.lstrip().startswith(start) for b in blocks(page)), (page, start)
