"""Scenarios: a drive scripted as phases in a TOML file, and the controller that drives it.

    [[phase]]
    name = "park"
    seconds = 3
    speed_kmh = 0

    [[phase]]
    name = "accelerate to 60"
    seconds = 12
    speed_kmh = 60                      # reached by the end of the phase
    signals = { TURN_SIGNALS = "left" } # held during the phase (value or label)
    fault = "overheat"                  # optional: a fault during the phase

The file is user input: it is read with a bound on its size and validated by pydantic, and
a mistake is one clear error naming the phase and the field. `ScenarioCycle` replaces the
model's default drive cycle: it works the pedals and the lever so that the speed follows a
straight line from where each phase starts to its target, so the engine, the gear and the
OBD-II answers follow the scenario. Bundled examples live in `firmware_sim/scenarios/`.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from firmware_sim.faults import FAULTS, TARGETED_FAULTS

__all__ = [
    "MAX_SCENARIO_BYTES",
    "Phase",
    "Scenario",
    "ScenarioCycle",
    "ScenarioError",
    "bundled_scenarios",
    "load_scenario",
]

MAX_SCENARIO_BYTES: Final = 256 * 1024
_MAX_PHASES: Final = 1000
_MAX_SIGNALS: Final = 256
_LEVERS = Literal["P", "R", "N", "D", "S", "L"]
_DOORS = Literal["front_left", "front_right", "rear_left", "rear_right", "tailgate", "hood"]
_TURNS = Literal["Off", "Left", "Right", "Hazard"]
_HEADLIGHTS = Literal["Off", "Parking", "LowBeam", "HighBeam", "Auto"]
_Name = Annotated[str, StringConstraints(min_length=1, max_length=200)]
_Label = Annotated[str, StringConstraints(max_length=200)]


class ScenarioError(ValueError):
    """A scenario file that cannot be read or is not valid; the message says where."""


class Phase(BaseModel):
    """One phase of a drive: `seconds` long, ending at `speed_kmh`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(max_length=80)] | None = None
    seconds: float = Field(gt=0, le=86_400)
    speed_kmh: float = Field(ge=0, le=250)
    gear: _LEVERS | None = Field(
        default=None, description="the gear lever; default P when standing still, else D"
    )
    signals: dict[_Name, float | bool | _Label] = Field(
        default_factory=dict, max_length=_MAX_SIGNALS
    )
    fault: Annotated[str, StringConstraints(min_length=1, max_length=300)] | None = None
    doors: dict[_DOORS, bool] = Field(default_factory=dict)
    turn: _TURNS | None = None
    headlights: _HEADLIGHTS | None = None

    @field_validator("fault")
    @classmethod
    def _known_fault(cls, value: str | None) -> str | None:
        if value is None:
            return None
        name, _, target = value.partition(":")
        if name not in FAULTS:
            raise ValueError(f"unknown fault {name!r}; known faults: {', '.join(FAULTS)}")
        keyword = TARGETED_FAULTS.get(name)
        if keyword and not target.strip():
            raise ValueError(f"fault {name} needs a target: {name}:{keyword.upper()}")
        if not keyword and target:
            raise ValueError(f"fault {name} takes no target (got {target!r})")
        return value

    def fault_call(self) -> tuple[str, dict[str, str]] | None:
        """The fault as `inject_fault` arguments, or None."""
        if self.fault is None:
            return None
        name, _, target = self.fault.partition(":")
        keyword = TARGETED_FAULTS.get(name)
        return name, ({keyword: target.strip()} if keyword else {})


class Scenario(BaseModel):
    """A scripted drive: phases one after the other, then the last one holds (or, with
    `repeat`, the first starts again)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(max_length=200)] | None = None
    description: Annotated[str, StringConstraints(max_length=4000)] | None = None
    repeat: bool = False
    phase: list[Phase] = Field(min_length=1, max_length=_MAX_PHASES)

    def phase_name(self, index: int) -> str:
        return self.phase[index].name or f"phase {index + 1}"


def bundled_scenarios() -> dict[str, str]:
    """The example scenarios shipped with the simulator: name -> its TOML text."""
    folder = resources.files("firmware_sim").joinpath("scenarios")
    return {
        entry.name.removesuffix(".toml"): entry.read_text("utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    }


def _read(source: str | Path) -> tuple[str, str]:
    """(where, text) of a scenario file, or of a bundled scenario named `source`."""
    path = Path(source)
    if not path.exists() and isinstance(source, str) and "/" not in source:
        bundled = bundled_scenarios()
        name = source.removesuffix(".toml")
        if name in bundled:
            return f"bundled scenario {name}", bundled[name]
        known = ", ".join(sorted(bundled))
        raise ScenarioError(f"no scenario file {source!r} (bundled scenarios: {known})")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SCENARIO_BYTES + 1)
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {source}: {exc.strerror or exc}") from None
    if len(data) > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"scenario {source} is larger than {MAX_SCENARIO_BYTES} bytes")
    try:
        return str(source), data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"scenario {source} is not UTF-8 text") from None


def parse_scenario(text: str, where: str = "scenario") -> Scenario:
    """A validated `Scenario` from TOML text; ScenarioError says what is wrong and where."""
    if len(text.encode("utf-8")) > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"{where} is larger than {MAX_SCENARIO_BYTES} bytes")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{where} is not valid TOML: {exc}") from None
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:5]:
            place = ".".join(
                f"phase {p + 1}" if isinstance(p, int) and i == 1 else str(p)
                for i, p in enumerate(error["loc"])
            ).replace("phase.phase", "phase")
            problems.append(f"{place or 'file'}: {error['msg']}")
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise ScenarioError(f"{where}: " + "; ".join(problems) + more) from None


def load_scenario(source: str | Path) -> Scenario:
    """A scenario from a file, or a bundled one by name (`park_accelerate_door`)."""
    where, text = _read(source)
    return parse_scenario(text, where)


class ScenarioCycle:
    """Works the pedals and the lever of a `VehicleModel` through a scenario's phases, in
    place of its `DriveCycle` (same interface: `controls`, `phase`, `restart`)."""

    _FULL_KMH_PER_S: Final = 9.0  # about what the model reaches at full throttle in 1st

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.index = 0
        self.elapsed_s = 0.0
        self.start_kmh = 0.0
        self.finished = False

    @property
    def phase(self) -> str:
        return self.scenario.phase_name(self.index)

    def restart(self, speed_kmh: float, lever: str) -> None:
        """Hand the pedals back mid-phase: the phase goes on from the speed it has now."""
        self.start_kmh = speed_kmh
        self.elapsed_s = 0.0

    def _advance(self, speed_kmh: float) -> None:
        phases = self.scenario.phase
        while self.elapsed_s >= phases[self.index].seconds and not self.finished:
            if self.index + 1 < len(phases):
                self.elapsed_s -= phases[self.index].seconds
                self.index += 1
            elif self.scenario.repeat:
                self.elapsed_s -= phases[self.index].seconds
                self.index = 0
            else:
                self.finished = True  # the last phase holds its target
            self.start_kmh = speed_kmh

    def controls(self, dt: float, speed_kmh: float, gear: int) -> tuple[float, bool, str]:
        """Advance by `dt`; (throttle %, brake, lever) to follow the phase's speed line."""
        self.elapsed_s += dt
        self._advance(speed_kmh)
        phase = self.scenario.phase[self.index]
        share = 1.0 if self.finished else min(1.0, self.elapsed_s / phase.seconds)
        wanted = self.start_kmh + (phase.speed_kmh - self.start_kmh) * share
        standing = phase.speed_kmh <= 0.0 and speed_kmh < 0.5
        lever = phase.gear or ("P" if standing and self.start_kmh < 0.5 else "D")
        error = wanted - speed_kmh
        if wanted <= 0.0 and speed_kmh < 0.5:
            return 0.0, lever != "P", lever
        if lever in ("P", "N") or error < -1.0:
            return 0.0, True, lever
        if phase.speed_kmh < self.start_kmh and error > 0.0:
            return 0.0, False, lever  # slowing down ahead of the line: coast
        # hold the line: air and rolling drag, plus a share of the gap
        cruise = 4.0 + speed_kmh * 0.25
        throttle = min(100.0, max(0.0, cruise + error * 12.0))
        return throttle, False, lever
