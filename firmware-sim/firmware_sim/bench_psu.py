"""A SCPI bench power supply on a pty: one channel, 0-30 V, 0-5 A, a resistive load.

It speaks SCPI as such supplies do (IEEE 488.2 common commands, long and short header forms,
any case, several commands in one line separated by `;`), answers queries with one line
ending in LF, and keeps errors in a queue read by `SYST:ERR?`:

    *IDN?  *RST  *CLS  *OPC?
    VOLT <v>   VOLT?   CURR <a>   CURR?          setpoints (CURR is the current limit)
    OUTP ON|OFF|1|0    OUTP?                      the output
    MEAS:VOLT?  MEAS:CURR?                        what the output really carries
    SYST:ERR?                                     the oldest error, `0,"No error"` when none

The load model: with the output on, the measured voltage is the setpoint and the measured
current is voltage / `load_ohms`. When that current exceeds the limit, the over-current
protection trips: the output switches off and error `-300` is queued, until OUTP ON again.
A command it does not know queues `-113,"Undefined header"` and answers nothing, as SCPI
instruments do; a value out of range queues `-222,"Data out of range"`.

Run on its own with `python -m firmware_sim --psu`.
"""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path

from firmware_sim.line_device import LineDevice

__all__ = ["IDENTITY", "BenchPsu"]

IDENTITY = "HWBRIDGE,PSU-3005,SIM00001,1.0.0"
MAX_VOLTS = 30.0
MAX_AMPS = 5.0
_QUEUE = 20
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

# Headers in their short and long forms (MEASure:VOLTage? is MEAS:VOLT? or MEASURE:VOLTAGE?);
# optional nodes in brackets as the standard writes them: [SOURce:]VOLTage[:LEVel].
_SOURCE = r"(?:SOUR(?:CE)?:)?"
_LEVEL = r"(?::LEV(?:EL)?)?"
_HEADERS = {
    r"\*IDN\?": "idn",
    r"\*RST": "rst",
    r"\*CLS": "cls",
    r"\*OPC\?": "opc",
    _SOURCE + r"VOLT(?:AGE)?" + _LEVEL: "set_volt",
    _SOURCE + r"VOLT(?:AGE)?" + _LEVEL + r"\?": "get_volt",
    _SOURCE + r"CURR(?:ENT)?" + _LEVEL: "set_curr",
    _SOURCE + r"CURR(?:ENT)?" + _LEVEL + r"\?": "get_curr",
    r"OUTP(?:UT)?(?::STAT(?:E)?)?": "set_outp",
    r"OUTP(?:UT)?(?::STAT(?:E)?)?\?": "get_outp",
    r"MEAS(?:URE)?:VOLT(?:AGE)?(?::DC)?\?": "meas_volt",
    r"MEAS(?:URE)?:CURR(?:ENT)?(?::DC)?\?": "meas_curr",
    r"SYST(?:EM)?:ERR(?:OR)?(?::NEXT)?\?": "syst_err",
}
_MATCHERS = [(re.compile(f"^:?{h}$", re.IGNORECASE), name) for h, name in _HEADERS.items()]


class BenchPsu(LineDevice):
    """The supply; `load_ohms` is the resistive load on its output (a test may change it)."""

    kind = "psu"

    def __init__(self, *, link: str | Path | None = None, load_ohms: float = 10.0) -> None:
        super().__init__(link=link)
        self.load_ohms = load_ohms
        self.commands_seen: list[str] = []  # every command executed, in order (tests)
        self._volts = 0.0
        self._amps = 1.0
        self._output = False
        self._tripped = False
        self._errors: deque[str] = deque(maxlen=_QUEUE)

    def _reset(self) -> None:
        super()._reset()
        self._rst()
        self._errors.clear()

    def _rst(self) -> None:
        self._volts, self._amps, self._output, self._tripped = 0.0, 1.0, False, False

    # -- state as a test sees it -------------------------------------------------------------

    @property
    def output(self) -> bool:
        return self._output

    @property
    def tripped(self) -> bool:
        return self._tripped

    @property
    def volts(self) -> float:
        return self._volts

    @property
    def amps_limit(self) -> float:
        return self._amps

    def measured(self) -> tuple[float, float]:
        """(volts, amps) at the output now, after the protection had its say."""
        self._protect()
        if not self._output:
            return 0.0, 0.0
        amps = self._volts / self.load_ohms if self.load_ohms > 0 else float("inf")
        return self._volts, amps

    def _protect(self) -> None:
        if not self._output:
            return
        if self.load_ohms <= 0 or self._volts / self.load_ohms > self._amps:
            self._output = False
            self._tripped = True
            self._error('-300,"Device-specific error: over-current protection tripped"')

    def _error(self, text: str) -> None:
        if len(self._errors) == _QUEUE - 1:
            self._errors.append('-350,"Queue overflow"')
        elif len(self._errors) < _QUEUE:
            self._errors.append(text)

    # -- SCPI ------------------------------------------------------------------------------------

    def _on_line(self, line: str) -> str | None:
        answers: list[str] = []
        for part in line.split(";"):
            command = part.strip()
            if not command:
                continue
            answer = self._command(command)
            if answer is not None:
                answers.append(answer)
        return ";".join(answers) if answers else None

    def _command(self, command: str) -> str | None:
        header, _, argument = command.partition(" ")
        argument = argument.strip()
        handler = next((name for regex, name in _MATCHERS if regex.match(header)), None)
        if handler is None:
            self._error('-113,"Undefined header"')
            return None
        self.commands_seen.append(command)
        if handler.startswith(("set_",)):
            if not argument:
                self._error('-109,"Missing parameter"')
                return None
        elif argument:
            self._error('-108,"Parameter not allowed"')
            return None
        result: str | None = getattr(self, f"_do_{handler}")(argument)
        return result

    def _number(self, text: str, maximum: float) -> float | None:
        if text.upper() in ("MIN", "MINIMUM"):
            return 0.0
        if text.upper() in ("MAX", "MAXIMUM"):
            return maximum
        if not _NUMBER.match(text):
            self._error('-224,"Illegal parameter value"')
            return None
        value = float(text)
        if not 0.0 <= value <= maximum:
            self._error('-222,"Data out of range"')
            return None
        return value

    def _do_idn(self, _: str) -> str:
        return IDENTITY

    def _do_rst(self, _: str) -> None:
        self._rst()

    def _do_cls(self, _: str) -> None:
        self._errors.clear()

    def _do_opc(self, _: str) -> str:
        return "1"

    def _do_set_volt(self, argument: str) -> None:
        value = self._number(argument, MAX_VOLTS)
        if value is not None:
            self._volts = value
            self._protect()

    def _do_get_volt(self, _: str) -> str:
        return f"{self._volts:.3f}"

    def _do_set_curr(self, argument: str) -> None:
        value = self._number(argument, MAX_AMPS)
        if value is not None:
            self._amps = value
            self._protect()

    def _do_get_curr(self, _: str) -> str:
        return f"{self._amps:.3f}"

    def _do_set_outp(self, argument: str) -> None:
        state = argument.upper()
        if state in ("ON", "1"):
            self._output, self._tripped = True, False
            self._protect()
        elif state in ("OFF", "0"):
            self._output = False
        else:
            self._error('-224,"Illegal parameter value"')

    def _do_get_outp(self, _: str) -> str:
        self._protect()
        return "1" if self._output else "0"

    def _do_meas_volt(self, _: str) -> str:
        return f"{self.measured()[0]:.3f}"

    def _do_meas_curr(self, _: str) -> str:
        return f"{self.measured()[1]:.4f}"

    def _do_syst_err(self, _: str) -> str:
        return self._errors.popleft() if self._errors else '0,"No error"'
