"""Command line: `python -m wheelfactory COMMAND`. The nox sessions call exactly these commands."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

from .components import OS, operating_system, platforms
from .errors import EXIT_INPUT, EXIT_TOOL, BadBytes, InputError, ToolFailure, UserError
from .host import machine as host_machine
from .host import write_atomically
from .inputs.matrix import PYPI
from .inputs.references import image_problem
from .plan import make_plan
from .progress import console
from .render import render_plan, stale_files, write
from .untrusted.shown import one_line

# The machines wheels built in an image (Linux) are built for: this host's natively, another under QEMU.
ARCHS = sorted(p.cibw_arch for p in platforms().values() if operating_system(p.os).builds_in_image)


def _root(args: argparse.Namespace) -> Path:
    return Path(args.root).resolve()


def _matrix(args: argparse.Namespace) -> Path | None:
    return Path(args.matrix).resolve() if args.matrix else None


def cmd_render(args: argparse.Namespace) -> int:
    root = _root(args)
    plan = make_plan(root, _matrix(args))
    rendered = render_plan(plan, root)
    out_dir = root / "build" / "variants"
    if args.check:
        stale = stale_files(rendered, out_dir)
        if stale:
            for rel in stale:
                console.print(f"build/variants/{rel}: stale — run `nox -s render` and commit the result")
            return 1
        console.print(f"build/variants: {len(rendered)} variants up to date")
        return 0
    write(rendered, out_dir)
    for r in rendered:
        for name in r.files:
            console.print(f"rendered build/variants/{r.variant.key}/{name}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    plan = make_plan(_root(args), _matrix(args))
    if args.job:
        command = plan.command_of(args.job)
        if command is None:
            raise UserError(f"no job {args.job!r} in the plan — `nox -s plan` lists them (the id fields)")
        print(command)
        return 0
    matrices = plan.as_json()
    shown = matrices[args.jobs] if args.jobs else matrices
    print(json.dumps(shown, indent=None if args.compact else 2))
    if not args.compact:
        for recipe, (builds, wheels, torches) in sorted(plan.costs().items()):
            train = f", {torches} torch releases (`--torch RELEASE` builds one)" if torches else ""
            console.print(f"{recipe}: {builds} build jobs, {wheels} wheels{train}", markup=False)
    return 0


def cmd_image(args: argparse.Namespace) -> int:
    from .host import cache_dir
    from .image import build_image, image_tag

    workdir = args.workdir or cache_dir() / f"image-{args.arch}"
    build_image(args.tag or image_tag(args.arch), workdir, args.arch, args.cpython_from_source, args.cpython_build)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from .pipeline import BuildRequest, build

    if args.container:
        return _build_in_container(args)
    _refresh(args)
    request = BuildRequest(
        _root(args),
        args.cuda,
        args.python,
        args.recipe,
        args.image,
        args.platform,
        _matrix(args),
        arch=args.arch,
        compiler_cache=not args.no_compiler_cache,
        torch=args.torch or None,
    )
    records = build(request)
    return 0 if records and all(r.passed for r in records) else 1


def _build_in_container(args: argparse.Namespace) -> int:
    """`build --platform windows --container IMAGE`: the same build inside a Windows build container."""
    from . import host
    from .platforms.windows import container_command

    if args.platform is None or operating_system(args.platform).builds_in_image:
        raise UserError("--container is for Windows builds (--platform windows); Linux builds run in --image")
    if host.platform_name() != "windows-amd64":
        raise UserError("a Windows build container runs on a Windows Docker host — this one is not")
    inner = [a for python in args.python for a in ("--python", python)]
    inner += [a for recipe in args.recipe for a in ("--recipe", recipe)]
    inner += [a for release in args.torch for a in ("--torch", release)]
    inner += ["--platform", "windows", *(["--matrix", args.matrix] if args.matrix else [])]
    inner += ["--no-compiler-cache"] if args.no_compiler_cache else []
    inner += ["--refresh"] if args.refresh else []
    command = container_command(
        host.container_engine(), args.container, _root(args).resolve(), host.cache_dir(), args.cuda, inner
    )
    console.print(" ".join(command), markup=False)
    return subprocess.run(command, check=False).returncode


def _refresh(args: argparse.Namespace) -> None:
    """--refresh: the smoke's wheels (NVIDIA's, the other requirements) resolved against the index again, not from
    the last hour's."""
    if args.refresh:
        from .smoke.resolutions import resolve_afresh

        resolve_afresh()


def cmd_smoke(args: argparse.Namespace) -> int:
    from .pipeline import smoke_existing

    _refresh(args)
    records = smoke_existing(_root(args), list(args.wheels), args.image, _matrix(args), list(args.python))
    return 0 if all(r.passed for r in records) else 1


def cmd_coinstall(args: argparse.Namespace) -> int:

    from .binaries.wheelcheck import check_wheel
    from .binaries.wheelfile import WheelName
    from .coinstall import check, with_neighbours
    from .report import record_coinstall
    from .untrusted.shown import shown

    wheels = sorted(w for p in args.wheels for w in (p.glob("*.whl") if p.is_dir() else [p]))
    problems = [f"{shown(str(w))}: no such wheel" for w in wheels if not w.is_file()]
    problems += [p for w in wheels if w.is_file() for p in check_wheel(w)[1]]
    if problems or not wheels:
        raise UserError("\n".join(one_line(p) for p in problems) or "no wheels given — name dist/*.whl")
    plan = make_plan(_root(args), _matrix(args))
    neighbours: dict[Path, list[str]] = {}
    for wheel in wheels:
        name = WheelName.of(wheel)
        variant = plan.variant_of(name.distribution, str(name.version))
        if variant is None:
            raise UserError(
                f"{wheel.name}: no recipe × CUDA major (× torch) of the matrix renders "
                f"{name.distribution} {name.version}"
            )
        neighbours[wheel] = variant.cuda.coinstall_neighbours
    results = check({w: n for w, n in neighbours.items() if n}) if any(neighbours.values()) else []
    for folder in sorted({w.parent for w in wheels}):
        found = with_neighbours([r for r in results if (folder / r.wheel).is_file()])
        record_coinstall(folder, found)
    for wheel in (w for w, n in neighbours.items() if not n):
        console.print(f"{wheel.name}: its CUDA major names no neighbours in the matrix — nothing to resolve")
    for result in results:
        said = f"{result.wheel} beside {result.neighbour}"
        if result.ok:
            nvidia = ", ".join(f"{d} {v}" for d, v in result.nvidia.items()) or "no NVIDIA distribution"
            console.print(one_line(f"{said} {result.release}: resolves — {nvidia}"), markup=False)
        else:
            console.print(one_line(f"{said} {result.release or ''}: NO resolution — {result.error}"), markup=False)
    return 0 if all(r.ok for r in results) else 1


def cmd_torch_index(args: argparse.Namespace) -> int:
    from .pytorch.coverage import write_coverage_pages
    from .pytorch.index_pages import describe, write_torch_indexes
    from .untrusted.shown import shown

    if not args.folder.is_dir():
        raise UserError(f"{shown(str(args.folder))}: no such folder — give the one holding the wheels (dist/)")
    plan = make_plan(_root(args), _matrix(args))
    written = write_torch_indexes(args.folder, plan.locked_torches_of)
    for page in write_coverage_pages(args.folder, plan):
        console.print(f"coverage: {page}", markup=False)
    if written:
        console.print(f"index pages of the wheels built against torch: {describe(args.folder, written)}", markup=False)
    else:
        console.print(f"{shown(str(args.folder))}: no wheel built against torch — no index pages", markup=False)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from .verify import PlannedWheel, load_plan, verify, wheels_in

    if args.plan:
        jobs = load_plan(Path(args.plan))
    else:
        jobs = [
            PlannedWheel.model_validate(job.as_json()) for job in make_plan(_root(args), _matrix(args)).wheel_jobs()
        ]
    wheels = sorted(w for p in args.wheels for w in (wheels_in(p) if p.is_dir() else [p]))
    problems = verify(jobs, wheels)
    for problem in problems:
        console.print(one_line(problem), markup=False)
    if problems:
        return 1
    console.print(f"{len(wheels)} wheels: exactly the {len(jobs)} the plan promised, twine-clean, within size limits")
    return 0


def cmd_recipe(args: argparse.Namespace) -> int:
    from .drafting import SourceGiven, complete_recipe, draft_recipe

    root = _root(args)
    if args.from_report:
        if not args.recipe:
            raise UserError("--from-report needs --recipe NAME: the recipe it completes")
        path, diff = complete_recipe(Path(args.from_report), args.recipe, root)
        if not diff:
            console.print(f"{path.relative_to(root)}: already allows everything the report shows")
            return 0
        for line in diff.splitlines():
            console.print(one_line(line), markup=False)
        console.print(f"completed {path.relative_to(root)}: read the diff above, and the comments it added")
        return 0
    given = [bool(args.source), bool(args.git)].count(True)
    if given != 1 or bool(args.git) != bool(args.rev):
        raise UserError("give one source: NAME[==VERSION], a folder in recipes/<name>/, or --git URL --rev COMMIT")
    if args.git:
        source = SourceGiven(git=args.git, rev=args.rev)
    elif Path(args.source).is_dir():
        source = SourceGiven(folder=Path(args.source))
    else:
        source = SourceGiven(sdist=args.source)
    path, notes = draft_recipe(source, root)
    console.print(f"drafted {path.relative_to(root)} — read its DECIDE: comments, then build it")
    for note in notes:
        console.print(f"  note: {one_line(note)}", markup=False)
    return 0


def cmd_facts(args: argparse.Namespace) -> int:
    """What the index says that the data files lack, as a diff with each fact's source; --write applies it
    (measuring new toolkits from their wheels), --check exits 1 when anything is behind."""
    from .facts.world import read  # the index readers load only for this command

    root = _root(args)
    findings = read(root, args.index, measured=args.write)
    diff = findings.diff()
    print(one_line_each(diff), end="")
    for source in findings.sources:
        console.print(f"read: {one_line(source)}", markup=False)
    for item in findings.to_fill:
        console.print(f"to fill by a person: {one_line(item)}", markup=False)
    if args.write:
        for relative, text in findings.files.changed().items():
            write_atomically(root / relative, text)
        console.print(f"wrote {len(findings.files.changed())} file(s)" if diff else "the data files are up to date")
        return 0
    if diff:
        console.print("the data files are behind the index — run `nox -s facts -- --write` and commit the result")
        return 1 if args.check else 0
    console.print("the data files are up to date with the index")
    return 0


def one_line_each(text: str) -> str:
    """A diff of text read from the index, each of its lines made safe for a CI log."""
    return "".join(one_line(line.rstrip("\n")) + "\n" for line in text.splitlines())


def _image(value: str) -> str:
    """--image: a container image reference, never anything the engine could take for more."""
    why = image_problem(value)
    if why:
        raise argparse.ArgumentTypeError(f"{value!r}: {why}")
    return value


def _add_build(sub: Any) -> None:
    """`build`: one CUDA major's wheels, built, repaired, audited and smoked."""
    build = sub.add_parser("build", help="build, repair, audit and smoke the wheels of one CUDA major")
    build.add_argument("--cuda", type=int, required=True, help="CUDA major")
    build.add_argument("--python", action="append", default=[], help="CPython version (repeatable)")
    build.add_argument("--recipe", action="append", default=[], help="recipe name (repeatable)")
    build.add_argument(
        "--torch",
        action="append",
        default=[],
        help="of the major's torch train, the release to build torch extensions against (repeatable; default: all)",
    )
    build.add_argument("--image", type=_image, help="Linux build image (overrides the matrix's)")
    build.add_argument("--platform", choices=list(get_args(OS)), help="defaults to this host's")
    build.add_argument(
        "--arch", choices=ARCHS, help="Linux: the machine to build for (default: this host's; another runs under QEMU)"
    )
    build.add_argument("--matrix", help="another matrix file")
    build.add_argument("--container", help="Windows: run the build inside this Windows build container image")
    build.add_argument(
        "--no-compiler-cache", action="store_true", help="compile everything afresh, without the compiler cache"
    )
    build.add_argument(
        "--refresh",
        action="store_true",
        help="resolve the smoke's wheels (NVIDIA's at the floors and the newest, the other requirements) against the "
        "index again, not from the last hour's",
    )
    build.set_defaults(run=cmd_build)


def _add_checks(sub: Any) -> None:
    """The commands that check wheels built before: smoke, coinstall, verify, and the index pages of those built
    against torch."""
    smoke = sub.add_parser("smoke", help="re-run the GPU-free smoke tiers on existing wheels")
    smoke.add_argument("wheels", nargs="+", type=Path)
    smoke.add_argument("--image", type=_image, help="the clean machine's image (default: the matrix's build image)")
    smoke.add_argument("--matrix", help="another matrix file")
    smoke.add_argument(
        "--python",
        action="append",
        default=[],
        help="for a wheel that serves several Pythons (abi3, py3-none): smoke-test it on this one (repeatable; "
        "default: the oldest and the newest it serves)",
    )
    smoke.add_argument(
        "--refresh",
        action="store_true",
        help="resolve the smoke's wheels (NVIDIA's at the floors and the newest, the other requirements) against the "
        "index again, not from the last hour's",
    )
    smoke.set_defaults(run=cmd_smoke)

    coinstall = sub.add_parser("coinstall", help="resolve each wheel together with its CUDA major's neighbours")
    coinstall.add_argument("wheels", nargs="+", type=Path, help="wheels, or directories holding them")
    coinstall.add_argument("--matrix", help="another matrix file")
    coinstall.set_defaults(run=cmd_coinstall)

    check = sub.add_parser("verify", help="the release gate: exactly the planned wheels, twine-clean, sized")
    check.add_argument("wheels", nargs="+", type=Path, help="wheels, or directories holding them")
    check.add_argument("--plan", help="the JSON `plan` printed (default: plan anew from matrix.yaml)")
    check.add_argument("--matrix", help="another matrix file")
    check.set_defaults(run=cmd_verify)

    index = sub.add_parser("torch-index", help="write the per-(torch, CUDA) index pages of a folder's wheels")
    index.add_argument("folder", type=Path, help="the folder holding the wheels (dist/): the pages go under it")
    index.add_argument("--matrix", help="another matrix file")
    index.set_defaults(run=cmd_torch_index)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="wheelfactory", description=__doc__)
    top.add_argument("--root", default=".", help="project root holding matrix.yaml, recipes/ and templates/")
    sub = top.add_subparsers(dest="command", required=True)

    render = sub.add_parser("render", help="render build/variants/<dist>/pyproject.toml")
    render.add_argument("--matrix", help="another matrix file")
    render.add_argument("--check", action="store_true", help="fail if build/variants is stale")
    render.set_defaults(run=cmd_render)

    plan = sub.add_parser("plan", help="print the CI job matrix as JSON")
    plan.add_argument("--matrix", help="another matrix file")
    plan.add_argument("--compact", action="store_true", help="one line, for $GITHUB_OUTPUT")
    plan.add_argument("--job", help="print only the command that reproduces this build job or wheel (its id)")
    plan.add_argument("--jobs", choices=["build", "smoke", "gpu"], help="print only this matrix")
    plan.set_defaults(run=cmd_plan)

    _add_build(sub)

    _add_checks(sub)

    recipe = sub.add_parser("recipe", help="draft a recipe from a source, or complete one from a build's report")
    recipe.add_argument("source", nargs="?", help="NAME==VERSION (or NAME: its newest sdist), or a folder")
    recipe.add_argument("--git", help="a git URL (with --rev)")
    recipe.add_argument("--rev", help="the full commit of --git")
    recipe.add_argument("--from-report", help="complete a recipe from this report (dist/report.json)")
    recipe.add_argument("--recipe", help="with --from-report: the recipe it completes")
    recipe.set_defaults(run=cmd_recipe)

    facts = sub.add_parser("facts", help="what the package index says that the data files lack, as a diff")
    facts.add_argument("--index", default=PYPI, help="the PEP 691 index to read (default: PyPI)")
    mode = facts.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="apply the diff (measuring new toolkits' wheels)")
    mode.add_argument("--check", action="store_true", help="exit 1 when the data files are behind the index")
    facts.set_defaults(run=cmd_facts)

    _image_parser(sub.add_parser("image", help="build the offline manylinux-compatible image"))
    return top


def _image_parser(image: argparse.ArgumentParser) -> None:
    image.add_argument(
        "--tag", help="default: manylinux-offline:latest, or manylinux-offline-ARCH:latest for an emulated machine"
    )
    image.add_argument(
        "--arch", choices=ARCHS, default=host_machine(), help="the machine it is for (default: this host's)"
    )
    image.add_argument("--workdir", type=Path, help="scratch space for the root file system")
    image.add_argument(
        "--cpython-from-source",
        action="append",
        default=[],
        metavar="X.Y",
        help="build this CPython from Debian's pinned source even where this host has a copy (repeatable); "
        "those the host lacks are always built",
    )
    image.add_argument(
        "--no-cpython-build",
        dest="cpython_build",
        action="store_false",
        help="build no CPython from source: take those the cache holds built, leave the others out (CI, where a "
        "cold build costs some 17 minutes each)",
    )
    image.set_defaults(run=cmd_image)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        result: int = args.run(args)
        return result
    except InputError as exc:
        for problem in exc.problems:
            console.print(str(problem), markup=False)
        return EXIT_INPUT
    except BrokenPipeError:  # the reader went away (`nox -s plan | head`): nothing left to say
        sys.stderr.close()
        return 0
    except ToolFailure as exc:
        console.print(f"error: {exc}", markup=False)
        return EXIT_TOOL
    except UserError as exc:
        console.print(f"error: {exc}", markup=False)
        return EXIT_INPUT
    except BadBytes as exc:  # bytes the user handed in (a wheel) that no reader took: bad input
        console.print(f"error: {exc}", markup=False)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
