"""Entry points. Each session installs the engine (once per state of pyproject.toml) and calls one
`python -m wheelfactory` command.

The GitHub Actions release pipeline runs these very sessions, with the arguments `nox -s plan` prints.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import nox

# uv where it is installed: a session's venv from a fresh clone in about 5 s, where venv and pip take about 21.
nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

NO_GPU = 4  # scripts/gpu_check.py's exit status when this machine has no GPU
CONSTRAINTS = "constraints.txt"  # the host-side tools, pinned exactly


def cuda_majors() -> list[int]:
    """The CUDA majors matrix.yaml names, one build session each. Read as text: nox runs this file without
    the engine's dependencies (no YAML parser); the engine validates the file itself. A matrix this cannot read
    (missing, a directory, not UTF-8, not YAML) must not stop nox: every major the factory knows then gets its
    session, whose engine names the matrix's problem at its line (exit 2), and `tests` or `lint` still run."""
    here = Path(__file__).parent
    try:
        text = (here / "matrix.yaml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    majors = {int(m) for m in re.findall(r"^\s*-?\s*major:\s*(\d+)\s*$", text, flags=re.MULTILINE)}
    if not majors:
        known = (here / "src" / "wheelfactory" / "data" / "toolkits.yaml").read_text(encoding="utf-8")
        majors = {int(m) for m in re.findall(r'^\s+"(\d+)\.\d+":', known, flags=re.MULTILINE)}
    return sorted(majors)


def _engine(session: nox.Session, *extras: str) -> None:
    """Install the engine (editable) into the session's venv with the host-side tools pinned (constraints.txt), once
    per state of its dependencies: source changes reach an editable install by themselves, and pip's reinstall
    would cost seconds on every run."""
    spec = f".[{','.join(extras)}]" if extras else "."
    inputs = Path("pyproject.toml").read_bytes() + Path(CONSTRAINTS).read_bytes()
    wanted = f"{spec} {hashlib.sha256(inputs).hexdigest()}"
    stamp = Path(str(session.virtualenv.location)) / ".wheelfactory-installed"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
        session.log(f"the engine ({spec}) is installed and its dependencies are unchanged")
        return
    session.install("-c", CONSTRAINTS, "-e", spec)
    stamp.write_text(wanted, encoding="utf-8")


def _factory(session: nox.Session, *args: str) -> None:
    """Run `python -m wheelfactory ARGS` in the session's venv. Its exit status becomes nox's, not nox's own 1:
    0 every wheel passed, 1 a gate rejected some (dist/ holds the rest), 2 bad input, 3 a build step or tool
    failed."""
    command = [str(Path(session.bin) / "python"), "-m", "wheelfactory", *args]
    session.log(" ".join(command))
    env = {**os.environ, "PATH": f"{session.bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    status = subprocess.call(command, env=env)
    if status:
        raise SystemExit(status)


@nox.session
def render(session: nox.Session) -> None:
    """Render build/variants/<dist>/pyproject.toml (`-- --matrix FILE`, `-- --check`)."""
    _engine(session)
    _factory(session, "render", *session.posargs)


@nox.session
def recipe(session: nox.Session) -> None:
    """Draft recipes/<name>/recipe.yaml from a source (`-- NAME==VERSION`, `-- --git URL --rev COMMIT`, or a folder
    in recipes/<name>/), or complete one from a first build (`-- --from-report dist/report.json --recipe NAME`)."""
    _engine(session)
    _factory(session, "recipe", *session.posargs)


@nox.session
def plan(session: nox.Session) -> None:
    """Print the CI job matrix as JSON (one entry per job: id, runner, session, arguments)."""
    _engine(session)
    _factory(session, "plan", *session.posargs)


def _build_session(major: int) -> None:
    @nox.session(name=f"build-cuda{major}")
    def build(session: nox.Session) -> None:
        _engine(session, "build")
        _factory(session, "build", "--cuda", str(major), *session.posargs)

    build.__doc__ = (
        f"Build, repair, audit and smoke every CUDA {major} wheel for this host "
        "(`-- --python 3.12 --recipe NAME --image IMAGE --platform linux|windows --arch x86_64|aarch64`)."
    )


for _major in cuda_majors():
    _build_session(_major)


@nox.session
def smoke(session: nox.Session) -> None:
    """Re-run the GPU-free smoke tiers on given wheels (`-- dist/*.whl`)."""
    _engine(session, "build")
    _factory(session, "smoke", *session.posargs)


@nox.session(name="gpu-check")
def gpu_check(session: nox.Session) -> None:
    """Run the recipes' GPU checks on given wheels, each in a fresh venv (`-- dist/*.whl`); needs an NVIDIA GPU.

    scripts/gpu_check.py needs only the standard library. Exit status 4 (not nox's 1) when this machine has no
    GPU, so callers can tell "no GPU" from a failure.
    """
    wheels = [arg for arg in session.posargs if arg.endswith(".whl")]
    options = [arg for arg in session.posargs if not arg.endswith(".whl")]
    command = [str(Path(session.bin) / "python"), "scripts/gpu_check.py", *options, "--wheel", *wheels]
    session.log(" ".join(command))
    status = subprocess.call(command)
    if status == NO_GPU:
        raise SystemExit(NO_GPU)
    if status:
        session.error(f"GPU checks failed (exit {status})")


@nox.session
def verify(session: nox.Session) -> None:
    """The release gate: exactly the planned wheels, `twine check --strict`, size limits (`-- dist/`)."""
    _engine(session, "build")
    _factory(session, "verify", *session.posargs)


@nox.session(name="torch-index")
def torch_index(session: nox.Session) -> None:
    """Write the per-(torch, CUDA) PEP 503 index pages of the wheels built against torch (`-- dist/`), under
    that folder's torch-index/ (a build writes dist/'s by itself)."""
    _engine(session, "build")
    _factory(session, "torch-index", *session.posargs)


@nox.session
def coinstall(session: nox.Session) -> None:
    """Resolve each wheel together with what its users run beside it, its CUDA major's `neighbours` in
    matrix.yaml (`-- dist/*.whl`): pip's resolver, metadata only; our wheels from a package index started on
    127.0.0.1, the rest from the public index. Exit 1 on a conflict, 3 without the public index."""
    _engine(session, "build")
    _factory(session, "coinstall", *session.posargs)


@nox.session
def facts(session: nox.Session) -> None:
    """Say what the package index has that the data files lack (new CUDA toolkits, torch releases and their CUDA,
    CPython releases), as a diff with each fact's source: `-- --write` applies it, `-- --check` exits 1 when the
    data is behind (`-- --index URL` reads another PEP 691 index)."""
    _engine(session)
    _factory(session, "facts", *session.posargs)


@nox.session
def image(session: nox.Session) -> None:
    """Build the offline manylinux-compatible image from Debian packages: `manylinux-offline:latest` for this
    host's machine, `manylinux-offline-aarch64:latest` with `-- --arch aarch64` (under QEMU)."""
    _engine(session)
    _factory(session, "image", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (slow ones included; `-- -m "not slow"` for the quick part, `-- -m heavy` for the builds
    against torch, which CI's time does not fit)."""
    _engine(session, "build", "test")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, mypy, zizmor and the GitHub workflow schema."""
    _engine(session, "build", "lint")
    session.run("ruff", "check", "src", "tests", "noxfile.py", "bench", "scripts", "fuzz")
    session.run("ruff", "format", "--check", "src", "tests", "noxfile.py", "bench", "scripts", "fuzz")
    session.run("mypy")
    session.run("zizmor", "--offline", ".github/workflows")
    workflows = sorted(str(p) for p in Path(".github/workflows").glob("*.yml"))
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)
    session.run("check-jsonschema", "--builtin-schema", "vendor.dependabot", ".github/dependabot.yml")


@nox.session
def fuzz(session: nox.Session) -> None:
    """Fuzz every reader of untrusted bytes, coverage-guided (atheris): `-- --seconds 60 --reader elf`. Findings
    land in tests/fuzz_cases/, which the tests replay."""
    _engine(session, "test")
    session.run("python", "-m", "fuzz", *session.posargs)
