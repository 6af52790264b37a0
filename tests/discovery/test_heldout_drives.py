"""The held-out drive generator (benchmarks/drives_heldout.py): its own encoder writes what
cantools writes, and a short drive has the truth and the reference it promises."""

from __future__ import annotations

import numpy as np
from benchmarks.drives import load_dbc, signal_chain
from benchmarks.drives_heldout import NAV_ID, _place, _usable, generate_heldout

from tests.shared_data import DATA, needs_shared

MLB = DATA / "opendbc" / "vw_mlb.dbc"


@needs_shared
def test_its_encoder_writes_what_cantools_writes() -> None:
    db = load_dbc(MLB)
    rng = np.random.default_rng(0)
    for message in [m for m in db.messages if _usable(m)][:25]:
        raws = {}
        payload = np.zeros((4, message.length), np.uint8)
        for s in message.signals:
            n = int(s.length)
            lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if s.is_signed else (0, (1 << n) - 1)
            raws[s.name] = rng.integers(lo, hi, 4, endpoint=True)
            _place(payload, signal_chain(s), raws[s.name])
        for i in range(4):
            values = {name: int(raw[i]) for name, raw in raws.items()}
            want = message.encode(values, scaling=False, padding=False, strict=False)
            assert bytes(payload[i]) == bytes(want), message.name


@needs_shared
def test_a_short_drive_has_its_truth_and_its_reference() -> None:
    drive = generate_heldout(MLB, 8.0, seed=3, max_messages=6)
    assert NAV_ID in set(drive.ids.tolist())
    assert drive.reference_signal == "VehSpd"
    assert {t.role for t in drive.truth} & {"value", "state", "flag"}
    assert np.all(np.diff(drive.t) >= 0)
