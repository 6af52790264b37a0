"""The wheel as a new user gets it: a packaging mistake fails CI (`make wheel-check`).

Builds the sdist, then the wheel from the sdist (as `python -m build` does, so a file the
sdist forgets is missing from the wheel too), checks that the wheel carries every data file
of the repository's prompts/, dbc/ and devices/, installs it into a fresh virtual environment
in a temporary folder (runtime dependencies from the package index), and from another
temporary folder runs what docs/install.md teaches: `hwbridge --version`, `hwbridge tools`,
`hwbridge schema DIR`, `python -m firmware_sim` until its first transport line, and
`hwbridge demo`. Prints how long each stage took.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_FOLDERS = {"prompts": "hwbridge/prompts", "dbc": "hwbridge/dbc", "devices": "hwbridge/devices"}
REQUIRED = (
    "hwbridge/__init__.py",
    "hwbridge/__about__.py",
    "hwbridge/py.typed",
    "hwbridge/cli/demo_session.toml",
    "firmware_sim/__main__.py",
    "firmware_sim/py.typed",
)
NOTICE = "no --dbc given, using the bundled demo vehicle"
TIMEOUT_S = 120


class SmokeFailure(Exception):
    """What went wrong, for one line on stderr."""


@contextmanager
def stage(name: str, timings: dict[str, float]) -> Iterator[None]:
    print(f"wheel-check: {name} ...", flush=True)
    started = time.monotonic()
    yield
    timings[name] = time.monotonic() - started


def run(
    argv: Sequence[str | Path], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command; a non-zero exit is a failure that shows its output."""
    proc = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * 3,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if proc.returncode != 0:
        shown = " ".join(str(a) for a in argv)
        raise SmokeFailure(
            f"`{shown}` exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
            f"\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise SmokeFailure(message)


def build(dist: Path) -> tuple[Path, Path]:
    """sdist and wheel (built from the sdist) in `dist`."""
    run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, ROOT],
        cwd=dist.parent,
    )
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    expect(len(sdists) == 1 and len(wheels) == 1, f"expected one sdist and one wheel: {wheels}")
    return sdists[0], wheels[0]


def check_contents(wheel: Path) -> None:
    """Every data file of the repository's folders, and the modules a user runs first."""
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = list(REQUIRED)
    for folder, target in DATA_FOLDERS.items():
        files = [p for p in (ROOT / folder).rglob("*") if p.is_file()]
        expect(bool(files) or folder == "devices", f"{folder}/ holds no files")
        wanted += [f"{target}/{p.relative_to(ROOT / folder).as_posix()}" for p in files]
    missing = [name for name in wanted if name not in names]
    expect(not missing, f"{wheel.name} lacks {', '.join(missing)}")


def install(wheel: Path, venv: Path) -> Path:
    """A fresh virtual environment holding the wheel; returns its bin folder."""
    run([sys.executable, "-m", "venv", venv], cwd=venv.parent)
    bin_dir = venv / "bin"
    run(
        [bin_dir / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel],
        cwd=venv.parent,
    )
    run([bin_dir / "python", "-m", "pip", "check"], cwd=venv.parent)
    return bin_dir


def user_env(bin_dir: Path) -> dict[str, str]:
    """The environment of someone who activated the fresh venv: nothing of the checkout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    return env


VERSIONS = """
import importlib.metadata, json, firmware_sim, hwbridge
from hwbridge.can.driver import CanDriver
from hwbridge.can.tools import CanToolDriver
from hwbridge.resources import bundled_dbc, bundled_dbcs, bundled_specs
print(json.dumps({
    "module": hwbridge.__version__,
    "metadata": importlib.metadata.version("mcs-hwbridge"),
    "CanDriver": CanDriver.meta.version,
    "CanToolDriver": CanToolDriver.meta.version,
    "files": [hwbridge.__file__, firmware_sim.__file__, str(bundled_dbc())],
    "dbcs": list(bundled_dbcs()),
    "specs": list(bundled_specs()),
}))
"""


def check_installed(bin_dir: Path, work: Path, version: str) -> None:
    """One version everywhere, and everything imported from the venv, not the checkout."""
    env = user_env(bin_dir)
    out = run([bin_dir / "hwbridge", "--version"], cwd=work, env=env).stdout.strip()
    expect(out == f"hwbridge {version}", f"hwbridge --version says {out!r}, the wheel {version}")
    facts = json.loads(run([bin_dir / "python", "-c", VERSIONS], cwd=work, env=env).stdout)
    versions = {k: facts[k] for k in ("module", "metadata", "CanDriver", "CanToolDriver")}
    expect(set(versions.values()) == {version}, f"versions disagree: {versions}")
    venv = str(bin_dir.parent.resolve())
    outside = [f for f in facts["files"] if not str(Path(f).resolve()).startswith(venv)]
    expect(not outside, f"not from the installed wheel: {outside}")
    expect("demo_vehicle.dbc" in facts["dbcs"], f"bundled databases: {facts['dbcs']}")
    specs = sorted(p.name for p in (ROOT / "devices").glob("*.toml"))
    expect(facts["specs"] == specs, f"bundled specs {facts['specs']}, devices/ has {specs}")


def check_tools_and_schema(bin_dir: Path, work: Path) -> None:
    env = user_env(bin_dir)
    tools = run([bin_dir / "hwbridge", "tools"], cwd=work, env=env)
    expect("read_signals" in tools.stdout, f"hwbridge tools listed no tools:\n{tools.stdout}")
    lines = tools.stderr.splitlines()
    expect(len(lines) == 1 and NOTICE in lines[0], f"hwbridge tools' stderr: {tools.stderr!r}")
    run([bin_dir / "hwbridge", "schema", work / "schema"], cwd=work, env=env)
    written = {p.name for p in (work / "schema").glob("*.json")}
    wanted = {f"{m}.schema.json" for m in ("DriverMeta", "Tool", "ToolCall", "DriverResponse")}
    expect(wanted <= written, f"hwbridge schema wrote {sorted(written)}")


def check_simulator(bin_dir: Path, work: Path) -> None:
    """`python -m firmware_sim` with no option: the bundled vehicle, ready, stopped cleanly."""
    proc = subprocess.Popen(
        [str(bin_dir / "python"), "-m", "firmware_sim"],
        cwd=work,
        env=user_env(bin_dir),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            ready = selector.select(TIMEOUT_S)
        line = proc.stdout.readline().strip() if ready else ""
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    expect(line.startswith("socketcand: socketcand://"), f"firmware_sim printed {line!r}: {err}")
    expect(proc.returncode == 0, f"firmware_sim exited {proc.returncode} on SIGTERM: {err}")
    expect(NOTICE in err and err.count("\n") == 1, f"firmware_sim's stderr: {err!r}")


def check_demo(bin_dir: Path, work: Path) -> None:
    demo = run([bin_dir / "hwbridge", "demo"], cwd=work, env=user_env(bin_dir))
    flat = " ".join(demo.stdout.split())
    for needle in ("socketcand://127.0.0.1:", "status: no call: final answer", "demo finished"):
        expect(needle in flat, f"hwbridge demo did not show {needle!r}:\n{demo.stdout}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    timings: dict[str, float] = {}
    base = Path(tempfile.mkdtemp(prefix="hwbridge-wheel-"))
    work = base / "elsewhere"
    work.mkdir()
    started = time.monotonic()
    try:
        with stage("build sdist and wheel", timings):
            sdist, wheel = build(base / "dist")
            check_contents(wheel)
        version = wheel.name.split("-")[1]
        with stage("install the wheel into a fresh venv", timings):
            bin_dir = install(wheel, base / "venv")
        with stage("version, tools, schema", timings):
            check_installed(bin_dir, work, version)
            check_tools_and_schema(bin_dir, work)
        with stage("python -m firmware_sim", timings):
            check_simulator(bin_dir, work)
        with stage("hwbridge demo", timings):
            check_demo(bin_dir, work)
    except (SmokeFailure, subprocess.TimeoutExpired) as exc:
        print(f"wheel-check: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"wheel-check: kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())
    print(
        f"wheel-check: {sdist.name} and {wheel.name} pass ({spent}; total "
        f"{time.monotonic() - started:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
