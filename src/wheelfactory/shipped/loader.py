"""The variant module's loader: finds the libraries of the variant's CUDA components wherever pip put them, loads
them (Linux) or adds their folders to the DLL search path (Windows), and reports where each came from."""

from __future__ import annotations

from .variant_data import COMPONENTS, DIST_NAME, NEEDED, NO_WHEEL, OPTIONAL, TORCH, TORCH_OLDEST, TORCH_PAGES, Spec


# CODE_STARTS: every variant module holds what follows, as it stands.
def _system() -> str:
    """This machine's OS as the specs name it: "windows", else "linux"."""
    import sys

    return "windows" if sys.platform == "win32" else "linux"


def _platform() -> str:
    """This machine as the build matrix names platforms: linux-x86_64, linux-aarch64, windows-amd64."""
    import platform

    return f"{_system()}-{platform.machine().lower()}"


# library file -> (path, why): what this module loaded or found, as it found it.
FOUND: dict[str, tuple[str, str]] = {}


def _own_site() -> str:
    """The site-packages this package is installed in: one folder up per package level."""
    import os

    site = os.path.dirname(os.path.abspath(__file__))
    for _ in range((__spec__.name if __spec__ else __name__).count(".")):
        site = os.path.dirname(site)
    return site


def _elsewhere(folder: str, name: str) -> tuple[str, str] | None:
    """(the first sys.path entry, other than the package's own site-packages, holding folder/name, why), or None."""
    import os
    import sys

    own = os.path.normcase(_own_site())
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        base = os.path.abspath(entry or ".")
        path = os.path.join(base, *folder.split("/"), name)
        if os.path.normcase(base) != own and os.path.isfile(path):
            return base, f"found under {base}, on sys.path, where the extensions' RPATH does not reach"
    return None


def _all_specs() -> dict[str, Spec]:
    return {**NEEDED, **COMPONENTS, **OPTIONAL}


def no_wheel(component: str) -> str | None:
    """Why this machine can have no copy of the component from pip ("nvidia-nccl-cu11 has no linux aarch64
    wheel"), or None: a package says that for an optional part it leaves out here, rather than a pip fix."""
    import platform

    spec = _all_specs()[component]
    system = _system()
    if spec[system] is None:
        return NO_WHEEL.format(distribution=spec["distribution"], where=system)
    machine = platform.machine().lower()
    if system == "linux" and spec["machines"] and machine not in spec["machines"]:
        return NO_WHEEL.format(distribution=spec["distribution"], where=f"linux {machine}")
    return None


def _root_of(folder: str, library: str) -> tuple[str, str] | None:
    """(the sys.path entry holding folder/library — the package's own site-packages first —, why), or None."""
    import os

    own = _own_site()
    if os.path.isfile(os.path.join(own, *folder.split("/"), library)):
        return own, "beside the package, where the extensions' RPATH reaches it"
    return _elsewhere(folder, library)


def _with_companions(component: str, system: str) -> list[tuple[str, str]]:
    """(path, why) of the component's library found on sys.path, after the libraries of the components it needs
    and before those of its own it opens by name — all from the same folder tree, so that no other copy (a
    system CUDA registered with ldconfig) stands in for one of them."""
    import glob
    import os

    specs = _all_specs()
    folder, libraries, opens = specs[component][system]
    found = _root_of(folder, libraries[0])
    if found is None:
        return []
    root, why = found
    paths = []
    for need in specs[component]["needs"]:
        layout = specs.get(need, {}).get(system)
        if layout and os.path.isfile(os.path.join(root, *layout[0].split("/"), layout[1][0])):
            paths.append((os.path.join(root, *layout[0].split("/"), layout[1][0]), f"needed by {libraries[0]}: " + why))
    paths.append((os.path.join(root, *folder.split("/"), libraries[0]), why))
    for pattern in opens:
        for path in sorted(glob.glob(os.path.join(glob.escape(os.path.join(root, *folder.split("/"))), pattern))):
            paths.append((path, f"opened by {libraries[0]} by name: " + why))
    return paths


def _load_linux() -> None:
    """Load each component's library (beside the package, only what it needs and opens), its needs and what it
    opens by name, from the sys.path entry that holds it, by full path: the one copy, whatever the system's
    loader would have found."""
    import ctypes
    import os

    own = os.path.normcase(_own_site())
    pending: list[tuple[str, str]] = []
    for component, spec in (*COMPONENTS.items(), *OPTIONAL.items()):
        if no_wheel(component):
            continue
        library = spec["linux"][1][0]
        for path, why in _with_companions(component, "linux"):
            if path in {queued for queued, _ in pending}:
                continue
            if os.path.basename(path) == library and os.path.normcase(path).startswith(own + os.sep):
                # Beside the package the extensions' RPATH reaches the component itself; what it needs and what it
                # opens by name are loaded all the same (a library's own RUNPATH may not reach them).
                FOUND.setdefault(library, (path, why))
                continue
            pending.append((path, why))
    # A library whose own dependencies are not loaded yet fails; it is tried again once the others are in.
    while pending:
        failed = []
        for path, why in pending:
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                failed.append((path, why))
                continue
            FOUND.setdefault(os.path.basename(path), (path, "loaded: " + why))
        if len(failed) == len(pending):
            break
        pending = failed


def _add_dll_directories() -> None:
    """Windows: add the folders of NVIDIA's DLLs and of those they need (beside the package or under another
    sys.path entry) and %CUDA_PATH%\\bin to the DLL search path. Since Python 3.8, PATH no longer serves extension
    modules' DLLs; delvewheel's own patch still serves the DLLs it vendored."""
    import os

    directories = []
    for component in (*COMPONENTS, *OPTIONAL):
        if no_wheel(component):
            continue
        for path, why in _with_companions(component, "windows"):
            FOUND.setdefault(os.path.basename(path), (path, "its folder added at import: " + why))
            directories.append(os.path.dirname(path))
    if os.environ.get("CUDA_PATH"):
        directories.append(os.path.join(os.environ["CUDA_PATH"], "bin"))
    # Keep the handles: closing one removes its directory.
    added = dict.fromkeys(d for d in directories if os.path.isdir(d))
    globals()["_DLL_DIRECTORIES"] = [os.add_dll_directory(d) for d in added]  # type: ignore[attr-defined,unused-ignore]


def _find_cuda() -> None:
    import sys

    if globals().get("_DONE"):
        return
    globals()["_DONE"] = True
    # On another OS (no CUDA wheels) nothing is loaded.
    loader = {"win32": _add_dll_directories, "linux": _load_linux}.get(sys.platform)
    if loader:
        loader()


def _mapped(name: str) -> str | None:
    """Where this process mapped a library of that file name from (Linux), or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return None
    return next((p for p in sorted(paths) if p.rsplit("/", 1)[-1] == name), None)


def report() -> list[tuple[str, str, str | None, str]]:
    """(component, library, path or None, why) for each component's library, as this process finds it, each
    followed by the libraries it needs and opens that were loaded with it (component "")."""
    import ctypes
    import os

    system = _system()
    rows: list[tuple[str, str, str | None, str]] = []
    for component, spec in (*COMPONENTS.items(), *OPTIONAL.items()):
        why_not = no_wheel(component)
        if why_not:
            rows.append((component, "-", None, why_not))
            continue
        library = spec[system][1][0]
        if library in FOUND:
            path, why = FOUND[library]
            rows.append((component, library, path, why))
            for companion, _ in _with_companions(component, system):
                name = os.path.basename(companion)
                if name == library:
                    continue
                where, why = FOUND.get(name, (companion, "not loaded"))
                mapped = _mapped(name)
                if mapped and os.path.normcase(mapped) != os.path.normcase(where):
                    where, why = mapped, f"NOT from the component's folder ({os.path.dirname(companion)})"
                rows.append(("", name, where, why))
            continue
        install = (
            f"pip install '{DIST_NAME}[{component}]'"
            if component in OPTIONAL
            else f"pip install {spec['distribution']}"
        )
        try:
            ctypes.CDLL(library)
        except OSError:
            rows.append((component, library, None, f"in no sys.path entry and not on the system — {install}"))
            continue
        where = _mapped(library) or "the system's search path"
        rows.append((component, library, where, f"not from a pip wheel: the system's loader found it — {install}"))
    return rows


def _release(version: str) -> tuple[int, ...]:
    """(2, 11) of "2.11.0+cu130"; () where it starts with no number."""
    numbers = []
    for part in version.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def torch_mismatch() -> str | None:
    """Why the installed torch is not one this package runs on, None where it is (or the package is not built with
    torch): the release it was compiled against (its extensions would fail to load on C++ symbols, or misbehave),
    or for a build on the stable ABI, that release's oldest target or a newer one."""
    if TORCH is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    wanted = f"torch {TORCH_OLDEST} or newer" if TORCH_OLDEST else f"torch {TORCH}"
    fix = f"pip install 'torch>={TORCH_OLDEST}'" if TORCH_OLDEST else f"pip install 'torch=={TORCH}.*'"
    built = f"{DIST_NAME} runs on {wanted}" if TORCH_OLDEST else f"{DIST_NAME} was built against {wanted}"
    others = f", or a torch it is built for ({', '.join(TORCH_PAGES)}: each on its index page under torch-index/)"
    try:
        found = version("torch")
    except PackageNotFoundError:
        return f"torch is not installed: {built} — {fix}{others if TORCH_PAGES else ''}"
    release = _release(found)
    runs = release >= _release(TORCH_OLDEST) if TORCH_OLDEST else release == _release(TORCH)
    if runs:
        return None
    # A build tied to its torch release: the build for the installed torch, where the train has one.
    page = next((page for train, page in TORCH_PAGES.items() if _release(train) == release), None)
    if page:
        fix += f", or install the build for torch {found} from the project's index page {page}"
    elif TORCH_PAGES:
        fix += others
    return f"torch {found} is installed, but {built} — {fix}"
