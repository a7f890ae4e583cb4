"""recipes/<name>/recipe.yaml: what a package is, where its source comes from, and which CUDA libraries each
of its modules may link — the typed model. recipe_checks.py loads it and checks it against the matrix, the
component table, the source tree and itself."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Discriminator, Field, Tag
from pydantic_core import PydanticCustomError

from ..binaries.wheelfile import WheelAbi
from .validation import Strict, VersionText

T = TypeVar("T")
TorchAbi = Literal["release", "stable"]
DRIVER = "driver"  # the pseudo-component a module policy names to be allowed to link the driver eagerly


# ---------------------------------------------------------------------------------------------- the source


class PathSource(Strict):
    path: str  # a folder inside the recipe's folder


class SdistSource(Strict):
    sdist: str  # "name==1.2.3"
    sha256: str  # of the archive


class GitSource(Strict):
    git: str  # https://, ssh://, git@ or file:// URL
    rev: str  # a full commit SHA


class UrlSource(Strict):
    url: str  # https://
    sha256: str  # of the file
    file: str = ""  # the name it is saved as; default: the URL's last part

    @property
    def saved_as(self) -> str:
        return self.file or PurePosixPath(urlsplit(self.url).path).name


SOURCE_KINDS = ("path", "sdist", "git")
EXTRA_SOURCE_KINDS = (*SOURCE_KINDS, "url")


def _one_kind_of(kinds: tuple[str, ...]) -> Callable[[object], object]:
    def one_kind(value: object) -> object:
        if isinstance(value, dict):
            given = [kind for kind in kinds if kind in value]
            if not given:
                listed = f"{', '.join(kinds[:-1])} or {kinds[-1]}"
                raise PydanticCustomError("source_kind", f"give exactly one of {listed} — e.g. {{path: source}}")
            if len(given) > 1:
                raise PydanticCustomError("source_kind", f"give only one of {', '.join(given)}")
        return value

    return one_kind


def _source_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        return next((kind for kind in EXTRA_SOURCE_KINDS if kind in value), None)
    kinds: dict[type, str] = {PathSource: "path", SdistSource: "sdist", GitSource: "git", UrlSource: "url"}
    return kinds.get(type(value))


Source = Annotated[
    Annotated[PathSource, Tag("path")] | Annotated[SdistSource, Tag("sdist")] | Annotated[GitSource, Tag("git")],
    Discriminator(_source_kind),
    BeforeValidator(_one_kind_of(SOURCE_KINDS)),
]
# What a build would download while it configures (CMake's FetchContent, CPM): a source like the main one, or a
# single file from an https URL, pinned by its sha256.
ExtraSource = Annotated[
    Annotated[PathSource, Tag("path")]
    | Annotated[SdistSource, Tag("sdist")]
    | Annotated[GitSource, Tag("git")]
    | Annotated[UrlSource, Tag("url")],
    Discriminator(_source_kind),
    BeforeValidator(_one_kind_of(EXTRA_SOURCE_KINDS)),
]


# ---------------------------------------------------------------------------------------------- the recipe


class Smoke(Strict):
    # Python statements that must run with no CUDA library installed (tier 1) and with them (tier 2).
    gpu_free: list[str] = []
    # Statements that raise ImportError naming the pip fix while optional components are absent (tier 1), and
    # run once they are installed (tier 2).
    needs_optional: list[str] = []
    # Commands that must succeed once the CUDA wheels are installed (tier 2).
    with_cuda: list[str] = []
    # Layouts of data/layouts.yaml the package does not work in, each with the reason its users read (in the
    # report and the variant's description), e.g. {target: "opens its library from sys.prefix"}. Their tier 2
    # still runs, and reports, but does not keep the wheel out of dist/. Default: every layout is supported.
    unsupported_layouts: dict[str, str] = {}
    # The package opens a CUDA library when it is imported (a library loaded with ctypes at import, as cufinufft
    # does): tier 1 then expects `import pkg` to fail cleanly, naming the missing library, and tier 2 imports it.
    cuda_at_import: bool = False
    # Where that import's error names no library (cufinufft's loader drops ctypes' OSError and raises "Could not
    # find cufinufft library in system path"): the text it does carry, which tier 1 then expects instead.
    cuda_import_error: str = ""


class GpuCheck(Strict):
    name: str = Field(min_length=1)
    run: str = Field(min_length=1)  # Python run with the package installed on a GPU machine; may call skip(reason)


class ProvidedLibraries(Strict):
    """Libraries that a dependency installs and the wheel's binaries link (torch's libc10.so): the repair never
    grafts them, the RPATH reaches them where the dependency puts them, and the audit accepts them only in a
    wheel that requires that dependency."""

    dir: str = Field(min_length=1)  # their folder in site-packages, as the dependency's wheel lays it out
    libraries: list[str] = Field(min_length=1)  # sonames and DLL names, fnmatch patterns (libtorch*.so)


class Recipe(Strict):
    name: str
    version: str
    summary: str = ""
    import_name: str = Field(alias="import")
    # Every top-level package the wheel installs (CuPy: cupy, cupyx, cupy_backends); default: [import].
    packages: list[str] = []
    source: Source
    # What the build would otherwise download while it configures, by the name CMake's FetchContent or CPM knows
    # it by (e.g. {CCCL: {git: https://github.com/NVIDIA/cccl.git, rev: <40 hex>}}): fetched and pinned like the
    # source, handed to the build as FETCHCONTENT_SOURCE_DIR_<NAME> and CPM_<NAME>_SOURCE, each a folder under
    # $WHEELFACTORY_SOURCES (also CPM_SOURCE_CACHE), with FetchContent told to download nothing.
    extra_sources: dict[str, ExtraSource] = {}
    # What the wheel's tag says of Python. cpython: one wheel per CPython of the matrix (cp312-cp312). abi3: one
    # wheel on the stable ABI, built with the matrix's oldest CPython and serving every newer one (cp310-abi3).
    # none: one wheel with no extension module for every Python (py3-none), e.g. a CUDA library opened with ctypes.
    wheel_abi: WheelAbi = "cpython"
    cuda: list[int] | None = None  # CUDA majors this recipe supports; all of the matrix's when absent
    platforms: list[str] | None = None  # platforms it supports (e.g. [linux-x86_64]); all of the matrix's when absent
    # The build compiles against torch (torch.utils.cpp_extension): each major's build takes the torch its
    # matrix.yaml record names, the wheel requires that release, and the toolkit is the one that torch was built
    # with.
    torch: bool = False
    # How the wheel is tied to torch. release: cpp_extension's C++ API, one torch release (above). stable: LibTorch's
    # stable ABI only (torch/csrc/stable, STABLE_TORCH_LIBRARY), compiled with TORCH_TARGET_VERSION set to
    # torch_target: the wheel runs on every torch from that release on and requires torch>=torch_target; the
    # audit (torch-abi-audit) refuses a module that reaches past the stable surface or needs a newer torch.
    torch_abi: TorchAbi = "release"
    torch_target: VersionText | None = None  # stable: the oldest torch it runs on, e.g. "2.11"
    components: list[str]
    optional: list[str] = []
    # Distribution -> the libraries of it that the binaries link (e.g. torch: {dir: torch/lib, libraries:
    # [libc10.so, "libtorch*.so"]}). A module policy names the distribution to let a module link them.
    provided_libraries: dict[str, ProvidedLibraries] = {}
    # Extension module (dotted name, or an fnmatch pattern such as "cupy._core.*" or "*") -> the components (and
    # provided_libraries' distributions) it may link. The most specific pattern that matches a module decides.
    modules: dict[str, list[str]]
    # Modules (patterns), or shared libraries' file names (patterns of shared_libraries), that must carry device
    # code for the variant's architectures: a build that quietly left CUDA out, or left a GPU out, is refused.
    device_code: list[str] = []
    # A binary (pattern) built on purpose for fewer architectures (e.g. a Hopper-only kernel: [90, 100, 120]): it
    # must carry SASS for those of the variant's that are listed here, PTX for the newest of them.
    device_code_archs: dict[str, list[int]] = {}
    # The CUDA libraries the package opens itself at run time instead of linking them (dlopen, ctypes, LoadLibrary,
    # cuda-pathfinder: cuda-bindings), by component (of components or optional), or `driver`. A wheel none of whose
    # binaries carries device code or links a CUDA library holds CUDA only through these; without them the audit
    # and the release gate refuse it as a CPU build under a CUDA name. The smoke loads each one's library from
    # NVIDIA's wheels beside the installed package.
    opens_cuda: list[str] = []
    # Shared libraries that are not extension modules (file-name patterns) -> the components they may link.
    shared_libraries: dict[str, list[str]] = {}
    # Requires-Dist besides the NVIDIA wheels; a mapping {major: requirement} is a requirement of that major only.
    # One that names a requirement of the source replaces it.
    dependencies: list[str | dict[int, str]] = []
    # Requirements the source states (PKG-INFO, setup()'s install_requires, [project]) that the variant's build would
    # not, by distribution name, each with the reason its reviewers read (pyvkfft's PKG-INFO names pyopencl, which
    # its setup.py adds only where it builds the OpenCL backend). The variant keeps every other one.
    dropped_requirements: dict[str, str] = {}
    # Variables for the build (a mapping {major: value} for one that differs per major); they may use the
    # factory's own, e.g. "$NVCC_GENCODE" or "$CMAKE_CUDA_ARCHITECTURES".
    environment: dict[str, str | dict[int, str]] = {}
    # The [build-system] of a source without a pyproject.toml (one with its own keeps it): name what setup.py
    # imports (e.g. Cython). The legacy backend is the one pip uses for such a source: it puts setup.py's folder
    # on sys.path, which setup.py scripts that import their own package rely on.
    build_requires: list[str] = ["setuptools>=77", "wheel"]
    build_backend: str = "setuptools.build_meta:__legacy__"
    size_limit_mb: int = Field(default=100, ge=1)
    # GPU architectures (sm_XY) to compile device code for, per CUDA major; data/toolkits.yaml has the defaults
    cuda_archs: dict[int, list[int]] = {}
    # let nvcc use a host compiler newer than its release accepts (-allow-unsupported-compiler); the report says so
    allow_unsupported_compiler: bool = False
    # nvcc compresses every fatbin entry (-Xfatbin=-compress-all: SASS too, not only PTX), a fifth of the size or
    # less for many kernels; false stores them as nvcc does by default
    compress_device_code: bool = True
    smoke: Smoke = Smoke()
    gpu_checks: list[GpuCheck] = []

    def builds_on(self, platform: str) -> bool:
        return self.platforms is None or platform in self.platforms


def most_specific(policies: dict[str, list[T]], name: str) -> list[T] | None:
    """The policy of the most specific pattern matching `name`: an exact name first, then the pattern with the
    most characters that are no wildcard."""
    matching = [pattern for pattern in policies if fnmatch.fnmatchcase(name, pattern)]
    if not matching:
        return None
    best = max(matching, key=lambda p: (p == name, len(re.sub(r"[*?]|\[[^]]*\]", "", p))))
    return policies[best]
