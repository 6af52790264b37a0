"""`hwbridge demo`: a recorded LLM session against the simulated vehicle, over a real transport.

The command's options are here; the session, the simulator and the playing are in
`demo_play`, imported when the demo runs (pydantic and rich are not needed for --help).
"""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "demo",
        help="a recorded LLM session against the simulated vehicle (what make demo runs)",
        description="Start the simulated vehicle in its own process (python -m firmware_sim, "
        "socketcand on loopback), connect a CanDriver to it and play a short session of "
        "recorded LLM outputs: no API key, no live model, no hardware. Runs from any folder; "
        "the demo vehicle's database ships with hwbridge.",
    )
    parser.add_argument(
        "--inspect",
        action="store_true",
        help="open the interactive inspector on the simulated bus instead (also "
        "HWBRIDGE_INSPECT=1)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hwbridge.cli.demo_play import run as play

    return play(args)
