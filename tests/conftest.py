"""Shared fixtures. Tests that need Docker fail under CI=true when it is missing, and skip elsewhere."""

from __future__ import annotations

import ast
import email.parser
import functools
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import NamedTuple, NoReturn

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheelfactory.components import component_table
from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import Variant, copy_inputs, make_plan
from wheelfactory.platforms import linux
from wheelfactory.render import render_plan
from wheelfactory.report import WheelRecord
from wheelfactory.sources import source_tree

# A session fixture every test module may ask for: NVIDIA's cuobjdump from its pip wheel.
from .cuobjdump import cuobjdump  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
OFFLINE_IMAGE = "manylinux-offline:latest"
# The matrix whose toolkits have an nvcc source this host reaches (Debian's packages); with the real manylinux
# images (a host that reaches their registry and NVIDIA's servers) the project's own matrix.yaml is built.
OFFLINE_MATRIX = "matrix-offline.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch copy of the project's inputs: matrix.yaml, recipes/ and templates/."""
    return copy_inputs(REPO, tmp_path / "project")


def docker_available() -> str | None:
    """None when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "the docker client is not installed"
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"no Docker engine answers: {probe.stderr.strip()[:200]}"
    return None


class Quiet(http.server.SimpleHTTPRequestHandler):
    """A request handler that keeps the test's output clean."""

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` answering HTTP on loopback, in a thread, while the block runs: its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def served(directory: Path) -> AbstractContextManager[str]:
    """`directory` served over HTTP on loopback, as a package index or NVIDIA's archive server would be: its URL."""
    return serving(functools.partial(Quiet, directory=str(directory)))  # type: ignore[arg-type]


def unavailable(why: str) -> NoReturn:
    """What a test does without a tool or image it needs: fail under CI=true (CI installs everything), else skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"required under CI=true: {why}")
    pytest.skip(why)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests under QEMU run last: where their arm64 image (4 minutes, mostly one core) is still being made beside
    the suite, their fixture waits for that build, and the rest of the suite need not."""
    emulated = {id(item) for item in items if "aarch64_image" in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: id(item) in emulated)  # stable: each part keeps its order


@pytest.fixture(scope="session")
def docker() -> None:
    why = docker_available()
    if why is not None:
        unavailable(f"needs Docker: {why}")


def local_image(image: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="session")
def build_image(docker: None) -> str:
    """The build image: WHEELFACTORY_TEST_IMAGE, else the offline one when built (`nox -s image`, as CI here
    does), else the matrix's manylinux image pulled from its registry."""
    image = os.environ.get("WHEELFACTORY_TEST_IMAGE")
    if image is None:
        if local_image(OFFLINE_IMAGE):
            return OFFLINE_IMAGE
        image = next(v for v in make_plan(REPO).variants if v.major == 12).cuda.platforms["linux-x86_64"].image
        assert image is not None
    pulled = local_image(image) or subprocess.run(["docker", "pull", image], capture_output=True).returncode == 0
    if not pulled:
        unavailable(
            f"the build image {image} cannot be had — run `nox -s image` first on a host without registry access"
        )
    return image


def matrix_for(root: Path, image: str) -> Path:
    """The matrix a test builds with `image`: toolkits with an offline nvcc source in the offline image."""
    return root / (OFFLINE_MATRIX if image == OFFLINE_IMAGE else "matrix.yaml")


SOURCES = Path(__file__).parent / "sources"


def add_source(root: Path, name: str) -> None:
    """Add a source of tests/sources (multipkg: shaped like CuPy; datalib: like CyFES) to a project as a recipe."""
    shutil.copytree(SOURCES / name, root / f"recipes/{name}/source")
    shutil.copy(SOURCES / f"{name}.recipe.yaml", root / f"recipes/{name}/recipe.yaml")


def add_multipkg(root: Path) -> None:
    add_source(root, "multipkg")


def declared_by_source(tree: Path) -> list[Requirement]:
    """What a source's own build declares it requires (extras aside), as its tools recorded it, read here apart
    from the factory: pyproject's static [project] dependencies, else the sdist's PKG-INFO Requires-Dist, else
    setuptools' egg-info requires.txt, else setup()'s literal install_requires."""
    project = tomllib.loads(text if (text := _text(tree / "pyproject.toml")) else "").get("project", {})
    if "dependencies" not in project.get("dynamic", ["dependencies"]):
        return [Requirement(line) for line in project.get("dependencies", [])]
    info = email.parser.Parser().parsestr(_text(tree / "PKG-INFO"))
    stated = [Requirement(line) for line in info.get_all("Requires-Dist") or []]
    if stated:
        return [r for r in stated if "extra" not in str(r.marker or "")]
    for requires in sorted(tree.glob("*.egg-info/requires.txt")):
        found, marker = [], ""
        for line in requires.read_text(encoding="utf-8").splitlines():
            if line.startswith("["):  # [extra], [:marker] or [extra:marker]
                extra, _, marker = line.strip("[]").partition(":")
                if extra:
                    break
            elif line.strip():
                found.append(Requirement(f"{line}; {marker}" if marker else line))
        return found
    call = next((n for n in ast.walk(ast.parse(_text(tree / "setup.py"))) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", getattr(n.func, "attr", "")) == "setup"), None)  # fmt: skip
    given = next((k.value for k in call.keywords if k.arg == "install_requires"), None) if call else None
    return [Requirement(line) for line in ast.literal_eval(given)] if given else []


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def assert_keeps_source_requirements(root: Path, name: str) -> None:
    """Each rendered variant of recipe `name` requires all its source declares: the same line, or where the recipe
    names that distribution (or it is torch, which the factory pins) one of that name. NVIDIA's CUDA wheels give
    way to the variant's own; the recipe's dropped_requirements are left out on purpose."""
    recipe = yaml.safe_load((root / "recipes" / name / "recipe.yaml").read_text(encoding="utf-8"))
    dropped = {canonicalize_name(n) for n in recipe.get("dropped_requirements", {})}
    named = {"torch"} | {
        canonicalize_name(Requirement(line).name)
        for dep in recipe.get("dependencies", [])
        for line in (dep.values() if isinstance(dep, dict) else [dep])
    }
    nvidia = {
        canonicalize_name(e.distribution) for c in component_table().components.values() for e in c.majors.values()
    }
    variants = [v for v in make_plan(root).variants if v.recipe.name == name]
    assert variants, name
    declared = declared_by_source(source_tree(variants[0].recipe.source, variants[0].recipe_dir))
    for variant in variants:
        pyproject = tomllib.loads((root / "build/variants" / variant.key / "pyproject.toml").read_text())
        rendered = [Requirement(line) for line in pyproject["project"]["dependencies"]]
        for requirement in declared:
            wanted = canonicalize_name(requirement.name)
            if wanted in dropped or wanted in nvidia:
                continue
            if wanted in named:
                assert any(canonicalize_name(r.name) == wanted for r in rendered), (variant.key, requirement)
            else:
                assert requirement in rendered, (variant.key, str(requirement), [str(r) for r in rendered])


class Built(NamedTuple):
    root: Path  # a scratch copy of the project: dist/ and build/ are there
    record: WheelRecord
    variant: Variant

    @property
    def wheel(self) -> Path:
        return self.root / "dist" / self.record.wheel


def changed_environment(variant: Variant, **changes: str) -> dict[str, str]:
    """CIBW_ENVIRONMENT_LINUX: the variant's rendered environment with some variables changed. It replaces the
    rendered table as a whole, as a user's override would."""
    values = {**linux.environment(variant, "linux-x86_64"), **changes}
    return {"CIBW_ENVIRONMENT_LINUX": " ".join(f'{k}="{v}"' for k, v in values.items())}


def build_recipe(
    base: Path,
    cuda: int,
    image: str,
    recipe: str = "cuprobe",
    add: Callable[[Path], object] | None = None,
    pythons: tuple[str, ...] = ("3.12",),
    torch: str | None = None,
    **environment: str,
) -> Built:
    """One recipe's Linux wheel for `pythons` (one wheel: cp312's, or the one abi3 or py3-none wheel that serves
    them) through the whole pipeline, in a scratch copy of the project (to which `add` may add a recipe first); for
    a recipe tied to its torch release, the build against `torch`."""
    root = copy_inputs(REPO, base / "project")
    if add is not None:
        add(root)
    matrix = matrix_for(root, image)
    variants = make_plan(root, matrix, [recipe]).variants
    variant = next(v for v in variants if v.major == cuda and (torch is None or (v.torch and v.torch.release == torch)))
    extra_env = changed_environment(variant, **environment) if environment else None
    records = build(
        BuildRequest(
            root,
            cuda,
            list(pythons),
            [recipe],
            image,
            None,
            matrix,
            extra_env=extra_env,
            torch=[torch] if torch else None,
        )
    )
    assert len(records) == 1
    return Built(root, records[0], variant)


# The session's cuprobe builds, one per CUDA major, shared by every test that reads a real wheel (built12 by some
# fifty, built13 by some twenty). Among CI's slowest 15 they show as the setup of whichever test asks first
# (2026-11-26: 141 s for the coinstall test's built12 and built13, 62 s for the fatbin test's built11): each
# provisions its toolkit (CUDA 11.8 and 12.4's nvcc from Debian's packages, 13's from PyPI), builds with cibuildwheel
# in the offline image, repairs, audits and runs every smoke tier once.
@pytest.fixture(scope="session")
def built11(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    return build_recipe(tmp_path_factory.mktemp("cuda11"), 11, build_image)


@pytest.fixture(scope="session")
def built12(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    return build_recipe(tmp_path_factory.mktemp("cuda12"), 12, build_image)


@pytest.fixture(scope="session")
def built13(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    return build_recipe(tmp_path_factory.mktemp("cuda13"), 13, build_image)


FAKE_NVCC = """#!/bin/sh
echo "Cuda compilation tools, release {release}, V{version}"
"""


def _archive(name: str, members: dict[str, str], windows: bool) -> bytes:
    buffer = io.BytesIO()
    if windows:
        with zipfile.ZipFile(buffer, "w") as archive:
            for path, text in members.items():
                archive.writestr(f"{name}/{path}", text)
    else:
        with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
            for path, text in members.items():
                data = text.encode()
                info = tarfile.TarInfo(f"{name}/{path}")
                info.size, info.mode = len(data), 0o755
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def serve_redist_release(
    directory: Path,
    release: str,
    nvcc_version: str,
    sha256_of_nvcc: str | None = None,
    platform: str = "linux-x86_64",
) -> None:
    """NVIDIA's redistrib_<release>.json with stand-in cuda_nvcc and cuda_cudart archives, laid out as NVIDIA's
    server has them: what provisioning fetches where no wheel carries nvcc. NVIDIA's server is out of reach
    here; the stand-in nvcc (a script on Linux) only says its version."""
    windows = platform.startswith("windows")
    exe = ".exe" if windows else ""
    manifest: dict[str, object] = {"release_label": release, "release_product": "cuda"}
    if (directory / f"redistrib_{release}.json").is_file():
        manifest = json.loads((directory / f"redistrib_{release}.json").read_text())
    cudart = {"lib/x64/cudart_static.lib": "lib", "lib/x64/cuda.lib": "lib"} if windows else {}
    cudart = cudart or {"lib/libcudart_static.a": "archive", "lib/stubs/libcuda.so": "stub"}
    archives = {
        "cuda_nvcc": {
            f"bin/nvcc{exe}": FAKE_NVCC.format(release=release.rsplit(".", 1)[0], version=nvcc_version),
            f"bin/ptxas{exe}": "ptxas",
            "bin/crt/link.stub": "stub",
            f"nvvm/bin/cicc{exe}": "cicc",
            "nvvm/libdevice/libdevice.10.bc": "bitcode",
            "include/crt/host_config.h": "/* the wheels' headers are used, not these */",
        },
        "cuda_cudart": cudart,
    }
    for component, members in archives.items():
        name = f"{component}-{platform}-{nvcc_version}-archive"
        relative = f"{component}/{platform}/{name}.{'zip' if windows else 'tar.xz'}"
        body = _archive(name, members, windows)
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_bytes(body)
        digest = hashlib.sha256(body).hexdigest()
        if component == "cuda_nvcc" and sha256_of_nvcc is not None:
            digest = sha256_of_nvcc
        entry = manifest.setdefault(component, {"name": component, "version": nvcc_version})
        assert isinstance(entry, dict)
        entry[platform] = {"relative_path": relative, "sha256": digest, "size": str(len(body))}
    (directory / f"redistrib_{release}.json").write_text(json.dumps(manifest))


def torch_mismatch_said(
    root: Path, recipe: str, installed: str | None, scratch: Path, built_against: str | None = None
) -> str:
    """What the variant module rendered for `recipe` (the offline matrix's CUDA 13 variant: the one built against
    torch `built_against`, for a recipe tied to each torch of the train) says of the torch installed — `installed`,
    as its metadata (what importlib.metadata reads), or none — through torch_mismatch(), run as the package's copy
    runs: by path, under its dotted name, in an isolated interpreter."""
    variants = render_plan(make_plan(root, root / OFFLINE_MATRIX, [recipe]), root)
    (rendered,) = [r for r in variants if built_against is None or r.variant.torch.release == built_against]  # type: ignore[union-attr]
    module = scratch / f"{recipe}_cuda_variant.py"
    module.write_text(rendered.files["_cuda_variant.py"])
    site = scratch / "site"
    site.mkdir()
    if installed:
        info = site / f"torch-{installed}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {installed}\n")
    code = (
        f"import runpy; print(runpy.run_path({str(module)!r}, run_name='{recipe}._cuda_variant')['torch_mismatch']())"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path[:0] = [{str(site)!r}]; {code}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()
