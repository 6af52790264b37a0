"""`python -m hwbridge` is the `hwbridge` command."""

from hwbridge.cli.main import main

raise SystemExit(main())
