"""The co-install check: each wheel resolved together with what its users run beside it — the neighbours its CUDA
major's entry in matrix.yaml names (PyTorch, CuPy, JAX of the same major) — by pip's own resolver, as users get
them: our wheels from a real package index started on 127.0.0.1 (pypiserver, filled with `twine upload`), the
neighbours and NVIDIA's wheels from the public index.

Per wheel and neighbour, two resolutions, metadata only (`pip install --dry-run --report`, wheels' metadata read
through HTTP range requests, nothing installed): the neighbour alone, which gives the release of it `pip install`
picks today; then the wheel with all its extras and exactly that release. A conflict names the requirements pip
says cause it; a resolution records the NVIDIA distributions' versions it chose. Pinning the neighbour keeps pip
from settling quietly on an older release of it (one built for another CUDA) that happens to fit.

Without the public index the check says so and stops (exit 3): it never passes on what it could not ask.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

from . import host
from .binaries.wheelfile import (
    WheelName,
    compatible_platforms,
    extras,
    marker_environment,
    requires_dist,
    with_extras,
)
from .errors import ToolFailure
from .inputs.matrix import PYPI
from .progress import step
from .untrusted.shown import one_line, shown

# How long pip may take to resolve one set of requirements, and the index server to answer once started.
RESOLVE_TIMEOUT_S = 600
SERVER_START_S = 30
# pip's words before the requirements that cause a conflict, one per line, up to a blank line.
_CAUSED_BY = "The conflict is caused by:"


@dataclass
class Resolution:
    """One wheel beside one neighbour: the neighbour's release, the NVIDIA versions chosen, or why none fits."""

    wheel: str
    neighbour: str
    release: str | None = None  # the neighbour's version pip picks alone
    nvidia: dict[str, str] = field(default_factory=dict)  # NVIDIA distribution -> version, in the joint resolution
    conflict: list[str] = field(default_factory=list)  # the requirements pip names as the cause
    error: str = ""  # what pip said when it found no resolution

    @property
    def ok(self) -> bool:
        return not self.error

    def as_json(self) -> dict[str, object]:
        shown_json: dict[str, object] = {"release": self.release, "resolved": self.ok, "nvidia": self.nvidia}
        if not self.ok:
            shown_json.update(conflict=self.conflict, error=self.error)
        return shown_json


def public_index() -> str:
    """The index the neighbours come from: PIP_INDEX_URL where set, else PyPI."""
    url = os.environ.get("PIP_INDEX_URL") or PYPI
    return url if url.endswith("/") else url + "/"


def require_public_index(index: str) -> None:
    """Stop (exit 3) unless the public index answers: the check must not pass on what it could not ask."""
    try:
        with urllib.request.urlopen(f"{index}pip/", timeout=20) as answer:
            answer.read(1)
    except (urllib.error.URLError, OSError) as exc:
        raise ToolFailure(
            f"the co-install check needs the public index {shown(index)}, which does not answer "
            f"({shown(str(getattr(exc, 'reason', exc)))}) — run it where the index can be reached"
        ) from None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def local_index(wheels: list[Path]) -> Iterator[str]:
    """A package index on 127.0.0.1 (pypiserver, no authentication, a scratch folder) holding `wheels`, uploaded
    with twine as a release uploads them: yields its simple URL; stopped, by its own process, when done."""
    with tempfile.TemporaryDirectory(prefix="wheelfactory-index-") as folder:
        port = _free_port()
        command = [sys.executable, "-m", "pypiserver", "run", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--authenticate", ".", "--passwords", ".", "--disable-fallback", folder]
        log = Path(folder).parent / f"{Path(folder).name}.log"
        with log.open("w") as output:
            server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}/"
            _wait_for(url, server, log)
            upload = [sys.executable, "-m", "twine", "upload", "--non-interactive", "--disable-progress-bar"]
            upload += ["--repository-url", url, "--username", "wheelfactory", "--password", "unused"]
            host.run([*upload, *wheels], f"uploading {len(wheels)} wheels to the local index with twine")
            yield f"{url}simple/"
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
            log.unlink(missing_ok=True)


def _wait_for(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise ToolFailure(f"the local package index (pypiserver) stopped: {host.tail(log.read_text())}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise ToolFailure(f"the local package index (pypiserver) did not answer in {SERVER_START_S} s")


def _pip_environment() -> dict[str, str]:
    """pip as the index and this command say, not as this machine's pip configuration would (a constraint file
    or a local wheel folder there would bend the resolution): no configuration file, no PIP_ variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _resolve(requirements: list[str], wheel: WheelName, indexes: list[str]) -> tuple[dict[str, str], str]:
    """({distribution: version} pip would install for `wheel`'s Python and platform, "") or ({}, pip's words)."""
    with tempfile.TemporaryDirectory(prefix="wheelfactory-resolve-") as scratch:
        report = Path(scratch) / "report.json"
        # --target makes the platform options legal on any pip; --dry-run installs nothing there.
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-input"]
        command += ["--target", str(Path(scratch) / "nowhere"), "--report", str(report), "--use-feature=fast-deps"]
        # A py3-none wheel names no Python: it is resolved for this one's.
        python = wheel.python if wheel.abi != "none" else f"{sys.version_info.major}.{sys.version_info.minor}"
        command += ["--disable-pip-version-check", "--only-binary=:all:", "--python-version", python]
        command += ["--implementation", "cp", "--abi", f"cp{python.replace('.', '')}", "--abi", "abi3"]
        command += ["--abi", "none"]
        command += [a for tag in compatible_platforms(wheel.platform_tag) for a in ("--platform", tag)]
        command += ["--index-url", indexes[0], *(a for url in indexes[1:] for a in ("--extra-index-url", url))]
        cert = os.environ.get("PIP_CERT")
        command += ["--cert", cert] if cert else []
        done = host.run([*command, *requirements], "pip's resolver", check=False, env=_pip_environment(),
                        timeout=RESOLVE_TIMEOUT_S)  # fmt: skip
        if done.returncode != 0 or not report.is_file():
            return {}, done.stdout + done.stderr
        installed = json.loads(report.read_text(encoding="utf-8")).get("install", [])
    return {str(i["metadata"]["name"]): str(i["metadata"]["version"]) for i in installed}, ""


def conflict_of(output: str) -> list[str]:
    """The requirements pip names as the cause of a conflict, each without its environment marker."""
    lines = output.splitlines()
    if _CAUSED_BY not in (line.strip() for line in lines):
        return []
    start = next(i for i, line in enumerate(lines) if line.strip() == _CAUSED_BY) + 1
    causes = []
    for line in lines[start:]:
        if not line.strip():
            break
        causes.append(line.strip().split("; ", 1)[0])
    return causes


def _requirement_on(wheel: Path, distribution: NormalizedName, release: str) -> Requirement | None:
    """The wheel's own requirement on `distribution` (for its platform and Python, whatever extras) that
    `release` does not meet: what installing it beside that release would change."""
    environment = marker_environment(WheelName.of(wheel))
    for requirement in requires_dist(wheel, with_extras=False):
        applies = requirement.marker is None or requirement.marker.evaluate(environment)
        on_it = applies and canonicalize_name(requirement.name) == distribution
        if on_it and not requirement.specifier.contains(release, prereleases=True):
            return requirement
    return None


def resolve_beside(wheel: Path, neighbour: str, indexes: list[str]) -> Resolution:
    """The wheel (with every extra) and the release of `neighbour` that pip picks alone, resolved together."""
    name = WheelName.of(wheel)
    result = Resolution(wheel.name, neighbour)
    alone, error = _resolve([neighbour], name, indexes[1:])
    wanted = canonicalize_name(Requirement(neighbour).name)
    release = next((v for d, v in alone.items() if canonicalize_name(d) == wanted), None)
    if release is None:
        result.error = f"{neighbour} alone has no resolution here: {one_line(host.tail(error, 4))}"
        return result
    result.release = release
    pinned = Requirement(neighbour)
    pinned.specifier = type(pinned.specifier)(f"=={release}")
    ours = f"{with_extras(name.distribution, extras(wheel))}=={name.version}"
    chosen, error = _resolve([ours, str(pinned)], name, indexes)
    if error:
        result.conflict = conflict_of(error)
        result.error = "; ".join(result.conflict) if result.conflict else one_line(host.tail(error, 4))
        moved = _requirement_on(wheel, wanted, release)
        if moved is not None:
            result.error = (
                f"{name.distribution} {name.version} requires {moved}: installing it would move a user's "
                f"{pinned.name} {release} — {result.error}"
            )
        return result
    result.nvidia = {d: v for d, v in sorted(chosen.items()) if canonicalize_name(d).startswith(("nvidia-", "cuda-"))}
    return result


def check(wheels: dict[Path, list[str]]) -> list[Resolution]:
    """Each wheel beside each of its neighbours (wheel -> neighbour requirements): our wheels from a local index,
    the rest from the public one, four resolutions at a time."""
    index = public_index()
    require_public_index(index)
    pairs = [(wheel, neighbour) for wheel, neighbours in wheels.items() for neighbour in neighbours]
    what = f"resolve {len(wheels)} wheels beside their neighbours ({len(pairs)} resolutions)"
    with local_index(sorted(wheels)) as ours, ThreadPoolExecutor(4) as pool, step(what) as outcome:
        results = list(pool.map(lambda pair: resolve_beside(pair[0], pair[1], [ours, index]), pairs))
        outcome.failed = not all(r.ok for r in results)
    return results


def with_neighbours(results: list[Resolution]) -> dict[str, dict[str, object]]:
    """wheel -> neighbour -> what the report records of it."""
    found: dict[str, dict[str, object]] = {}
    for result in results:
        found.setdefault(result.wheel, {})[result.neighbour] = result.as_json()
    return found
