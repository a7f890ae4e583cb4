"""Whether a `-cudaNNx` wheel holds CUDA at all. Its name promises it: a build that missed the source's CUDA switch
compiles the CPU code only, and that wheel passes every check of what it links (it links nothing). A wheel holds
CUDA where one of its binaries carries device code (a fatbin section) or links a CUDA library of its major or the
driver (DT_NEEDED, PE imports and delay loads), or where its recipe declares the CUDA libraries the package opens
itself at run time (`opens_cuda`: cuda-bindings dlopens NVIDIA's libraries, linking none). The audit asks it of
each wheel before dist/, the release gate again of each wheel it is handed."""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable
from pathlib import Path

from .binaries.wheelfile import Binary, unvendored
from .components import OS, component_table
from .drafting.cuda_build import cuda_switches
from .errors import UserError
from .inputs import Source
from .sources import source_tree
from .untrusted.shown import shown


def is_cuda_library(library: str, major: int, os_name: OS) -> bool:
    """A library of CUDA `major` (any component's, a vendored copy's name included) or the driver."""
    table = component_table()
    library = unvendored(library).lower()
    patterns = [*table.all_libraries(major, os_name), table.driver.on(os_name)]
    return any(fnmatch.fnmatch(library, p.lower()) for p in patterns)


def cuda_in(binary: Binary, major: int, os_name: OS) -> list[str]:
    """What of CUDA one binary holds: its device code, each CUDA library it links."""
    held = ["device code"] if binary.device_code else []
    return held + [lib for lib in (*binary.needed, *binary.lazy) if is_cuda_library(lib, major, os_name)]


def no_cuda(binaries: Collection[Binary], major: int, os_name: OS, opens: Collection[str]) -> str | None:
    """None where the wheel holds CUDA; else what was looked for, in one line."""
    if opens or any(cuda_in(b, major, os_name) for b in binaries):
        return None
    driver = component_table().driver.on(os_name)
    looked = (
        f"none of its {len(binaries)} binaries carries device code (a fatbin section) or links a CUDA {major} "
        f"library or the driver ({driver})"
        if binaries
        else "it has no binary"
    )
    return (
        f"holds no CUDA: {looked}, and the recipe declares no CUDA library that the package opens itself "
        "(opens_cuda) — a CPU build under a CUDA name is never shipped"
    )


def switch_hint(source: Source, recipe_dir: Path, environment: Iterable[str]) -> str:
    """Where the build's CUDA switch probably is, as a draft of the source reads it (`nox -s recipe`): the
    switches it would set, or where to look when it finds none. `environment`: the recipe's variables and values,
    which may set one already."""
    try:
        switches = cuda_switches(source_tree(source, recipe_dir))
    except UserError:  # a source no longer at hand: the words below say where to look
        switches = {}
    given = " ".join(environment)
    missed = [how for name, how in switches.items() if name not in given]
    if missed:
        return (
            f"the build left CUDA out: turn its CUDA switch on in the recipe's environment — the source reads "
            f"{'; '.join(shown(s) for s in missed)}"
        )
    return (
        "the build left CUDA out: find what turns its CUDA build on (a CMake option or variable guarding "
        "enable_language(CUDA), find_package(CUDAToolkit) or project(... CUDA); a variable setup.py reads before it "
        "adds its CUDA extensions) and set it in the recipe's environment; the build log says whether nvcc ran. A "
        "package that opens NVIDIA's libraries itself names them in opens_cuda"
    )
