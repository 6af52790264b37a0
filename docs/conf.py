"""Sphinx configuration of the hwbridge documentation: MyST Markdown pages, the command
reference from the argparse parsers (docs/_ext/cli_help.py), the API reference from the docstrings
(autodoc + napoleon). `make docs` builds it with warnings as errors."""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A checkout builds without installing: the package and the simulator come from the tree.
for folder in ("src", "firmware-sim"):
    if str(ROOT / folder) not in sys.path:
        sys.path.insert(0, str(ROOT / folder))

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

from hwbridge import __version__  # noqa: E402

# The SDKs behind the optional extras build pydantic models when imported; imported here, before
# autodoc imports anything, they load as they do in a program (imported later, under autodoc,
# their models fail to build). Without an extra, its part of the API reference is left out.
for _module in ("hwbridge.mcp", "openai", "anthropic", "ollama"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_module)

project = "hwbridge"
author = "hwbridge developers"
copyright = "hwbridge developers"
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "cli_help",
    "plain_docstrings",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}

html_theme = "alabaster"
html_title = f"hwbridge {release}"
html_static_path = ["_static"]
html_css_files = ["hwbridge.css"]  # transcripts wrap instead of being clipped
html_theme_options = {"page_width": "1240px", "body_max_width": "none"}
