"""`make demo` as a script: the same as `hwbridge demo` (see hwbridge/cli/demo_play.py).

The demo lives in the package so that it runs from an installed wheel too; this file stays
for `python examples/demo.py` and HWBRIDGE_INSPECT=1.
"""

from hwbridge.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main(["demo"]))
