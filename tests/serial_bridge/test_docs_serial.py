"""The bench policy of docs/serial.md, shown but not run (it needs a device), names only real
SendPolicy fields; the page's sessions run in tests/test_docs_examples.py."""

from __future__ import annotations

import re

from tests.docs_pages import block_under


def test_the_policy_example_names_only_real_fields() -> None:
    from hwbridge import SendPolicy

    block = block_under("docs/serial.md", "One policy for CAN and serial")
    assert block.mark == "skip"
    call = re.search(r"SendPolicy\((.*?)\)\n", block.code, re.S)
    assert call is not None
    kwargs = call.group(1).replace('audit_log="bench.jsonl"', "audit_log=None")
    policy = eval(f"SendPolicy({kwargs})", {"SendPolicy": SendPolicy})
    assert policy.allows_command("output_on") and policy.allows_message("ClimateCommand")
