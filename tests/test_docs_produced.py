"""Every block a page marks `<!-- produced: NAME -->` is what NAME's program prints now, and
the pictures of docs/_static are what it draws: made again by tests/docs_produced.py (the
simulated vehicle on a SimulatedClock, the tests' loopback model), so none can go stale.
`python -m tests.docs_produced --write` writes them again after a change."""

from __future__ import annotations

import html
import re

import pytest

from tests.docs_pages import text
from tests.docs_produced import PRODUCERS, STATIC, marked, shown_block

pytestmark = pytest.mark.live  # the chat session runs the simulated vehicle in real time

FIX = "run `python -m tests.docs_produced --write {name}` and look at the change"


def test_every_mark_names_a_producer_and_every_producer_is_shown() -> None:
    places = marked()
    assert set(places) <= set(PRODUCERS), set(places) - set(PRODUCERS)
    shown_in_pages = {"evidence"}  # a page links it (docs/discovery.md), no block
    assert set(PRODUCERS) - set(places) <= shown_in_pages


SLOW = {"farm"}  # four processes: two simulators, two MCP servers
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
    made = producer.make()
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
