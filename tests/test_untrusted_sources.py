"""What the drafter, the completion and the index pages read is untrusted like every other byte (issue 48): a source
tree, a report, a folder of wheels. Each hostile shape here is refused, noted or escaped within bounds — the shapes
a folder can hold are in tests/bad_inputs/cases/cli-recipe-*; these are the ones made on the spot (too large for
a file of the corpus, a git repository, a wheel) and the escaping helpers, one a destination."""

from __future__ import annotations

import html
import html.parser
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from ruamel.yaml import YAML

from wheelfactory import sources
from wheelfactory.cli import main
from wheelfactory.drafting import SourceGiven, complete_recipe, draft_recipe
from wheelfactory.errors import BadBytes
from wheelfactory.untrusted.shown import one_line, shown, yaml_comment, yaml_scalar
from wheelfactory.untrusted.trees import MAX_DEPTH, parse_json, parse_python, parse_toml

from .test_untrusted import bounded

# What a name from a source, report or wheel may hold to break out of where it is written: a line break (of each
# kind YAML knows), YAML's syntax, an ANSI escape, and a line GitHub Actions reads as a workflow command.
HOSTILE = [
    "a\nallow_unsupported_compiler: true",
    "a\r\ncompress_device_code: false",
    "a\x85b\u2028c\u2029d",
    "key: value",
    "x # not a comment",
    "&anchor *alias",
    "!!python/object:os.system",
    "- [item]",
    "\x1b[31mred\x1b[0m",
    "::error file=x::pwned",
    "\n::add-mask::secret",
    "  ::warning::indented",
]


def _folder_source(project: Path, name: str, files: dict[str, str | bytes]) -> Path:
    source = project / "recipes" / name / "source"
    for relative, content in {f"{name}/__init__.py": "", **files}.items():
        path = source / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return source


def _pyproject(name: str, more: str = "") -> str:
    return f'[project]\nname = "{name}"\nversion = "1.0"\n{more}'


# ---------------------------------------------------------------------------------------------- escaping


@pytest.mark.parametrize("text", HOSTILE)
def test_each_destination_has_one_helper_that_keeps_a_hostile_string_in_its_place(text: str) -> None:
    # A log line: one line, no command at its start (GitHub ignores leading blanks).
    for logged in (shown(text), one_line(f"note: {text}")):
        assert "\n" not in logged and "\r" not in logged and "\x1b" not in logged
        assert not logged.lstrip().startswith("::")
    # A YAML value: read back exactly, on one line.
    scalar = yaml_scalar(text)
    assert len(scalar.splitlines()) == 1 and yaml.safe_load(f"key: {scalar}\n") == {"key": text}
    # A YAML comment: one line, after which nothing becomes a key (PyYAML's reader and ruamel's).
    document = f"key: value  # {yaml_comment(text)}\nother: 1\n"
    assert len(document.splitlines()) == 2
    assert yaml.safe_load(document) == {"key": "value", "other": 1}
    assert dict(YAML(typ="rt").load(document)) == {"key": "value", "other": 1}
    # HTML: an attribute's value and a text, read back exactly (the index pages' html.escape).
    parsed = _Anchor()
    parsed.feed(f'<a title="{html.escape(text)}">{html.escape(text)}</a>')
    assert parsed.found == [(text, text)]


class _Anchor(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str | None, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((dict(attrs)["title"], ""))

    def handle_data(self, data: str) -> None:
        self.found[-1] = (self.found[-1][0], self.found[-1][1] + data)


def test_a_name_from_a_report_cannot_add_keys_to_the_recipe_it_completes(project: Path, tmp_path: Path) -> None:
    """A binary's name with line breaks in it goes into the comment the completion adds: on one line, so that
    `allow_unsupported_compiler: true` stays text and the gates stay on."""
    member = "cuprobe/_fft.so\nallow_unsupported_compiler: true\ncompress_device_code: false  #"
    binary = {"member": member, "module": "cuprobe._runtime", "needed": ["libcufft.so.11"]}
    entry = {"wheel": "w.whl", "dist_name": "cuprobe-cuda12x", "cuda": 12, "platform": "linux-x86_64"}
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"wheels": [{**entry, "binaries": [binary]}]}))
    path, diff = complete_recipe(report, "cuprobe", project)
    completed = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert "allow_unsupported_compiler" not in completed and "compress_device_code" not in completed
    assert "cufft" in completed["components"] and completed["modules"]["cuprobe._runtime"] == ["cudart", "cufft"]
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert all(not line.startswith(("+allow", "+compress", "+::")) for line in added), added


# ---------------------------------------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    ("file", "content"),
    [
        ("pyproject.toml", "a = " + "[" * 100_000 + "]" * 100_000 + "\n"),
        ("pyproject.toml", "x" + ".x" * 100_000 + " = 1\n"),  # tomllib's time grows with the square of the parts
        ("setup.py", "x = " + "1+" * 100_000 + "1\n"),
        ("setup.py", "x = " + "-" * 100_000 + "1\n"),
    ],
    ids=["toml-arrays", "toml-dotted-key", "python-binop", "python-unary"],
)
def test_a_source_file_nested_too_deep_is_named_in_the_notes_not_a_traceback(
    file: str, content: str, project: Path
) -> None:
    """The draft is written from what could be read (PKG-INFO's name and version), its notes naming the file; in
    seconds (each parser's own bound is tested below: here setup.py is parsed by each of its readers)."""
    files = {
        "PKG-INFO": "Metadata-Version: 2.1\nName: deep\nVersion: 1.0\n",
        "pyproject.toml": _pyproject("deep"),
        "setup.py": "from setuptools import setup\nsetup()\n",
    }
    source = _folder_source(project, "deep", {**files, file: content})
    started = time.monotonic()
    path, notes = draft_recipe(SourceGiven(folder=source), project)
    assert time.monotonic() - started < 5
    assert path == project / "recipes/deep/recipe.yaml"
    assert [n for n in notes if n.startswith(file)], notes
    assert f"# NOTE: {file}" in path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("parse", "data"),
    [
        (parse_toml, b"a = " + b"{b = " * 5000 + b"1" + b"}" * 5000),
        (parse_toml, b"[" + b"a." * 200 + b"b]"),
        (parse_toml, b'a = "' + b'\\"' * 200_000 + b"\n"),  # a string left open, a quote in it at every step
        (parse_python, b"f" + b"(x" * 150 + b")" * 150),
        (parse_python, b"x = a" + b".b" * 50_000),
        (parse_json, b"[" * 100_000),
        (parse_json, b'{"a": ' * 50_000),
    ],
)
def test_every_parser_of_the_layer_refuses_depth_with_its_own_error(parse: object, data: bytes) -> None:
    assert callable(parse)
    assert isinstance(bounded(lambda: parse(data, "f")), BadBytes)


def test_a_real_pyprojects_dotted_keys_and_strings_are_not_counted_as_depth() -> None:
    dots = "." * (2 * MAX_DEPTH)
    text = f'[tool.scikit-build.cmake.define]\nX = "{dots}" # {dots}\nY = \'{dots}\'\nv = 1.5\nZ = """\n{dots}\n"""\n'
    assert parse_toml(text.encode(), "pyproject.toml")["tool"]["scikit-build"]["cmake"]["define"]["v"] == 1.5


def test_cmake_scans_are_linear_and_give_true_line_numbers(project: Path) -> None:
    """A switch a million lines down, a CUDA:: target on each of 10,000 lines, then 30,000 options whose
    description is left open (CMake reads their quotes as arguments running over lines, to the end): each match
    placed at its own line (not at the blank lines before it), in time that grows with the file, not its square."""
    cmake = "\n" * 1_000_000 + 'option(BIG_USE_CUDA "build the kernels" OFF)\nif(BIG_USE_CUDA)\n'
    cmake += "enable_language(CUDA)\nendif()\n" + "target_link_libraries(k CUDA::cublas)\n" * 10_000
    cmake += "set(CMAKE_CUDA_ARCHITECTURES 80 CACHE STRING x)\n" + 'option(OPEN_CUDA "\n' * 30_000
    source = _folder_source(project, "big", {"pyproject.toml": _pyproject("big"), "CMakeLists.txt": cmake})
    started = time.monotonic()
    path, _ = draft_recipe(SourceGiven(folder=source), project)
    assert time.monotonic() - started < 5
    text = path.read_text(encoding="utf-8")
    assert "CMakeLists.txt:1000003 enable_language(... CUDA) is guarded by BIG_USE_CUDA" in text
    assert "cublas: CMakeLists.txt:1000005" in text
    assert "CMakeLists.txt:1010005 sets CMAKE_CUDA_ARCHITECTURES" in text


def test_a_report_that_never_ends_is_refused_at_its_cap(project: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.symlink_to("/dev/zero")
    before = (project / "recipes/cuprobe/recipe.yaml").read_bytes()
    with pytest.raises(Exception, match="not a regular file"):
        bounded(lambda: complete_recipe(report, "cuprobe", project))
    assert (project / "recipes/cuprobe/recipe.yaml").read_bytes() == before


# ---------------------------------------------------------------------------------------------- links


def test_a_link_in_a_git_repository_is_not_followed_out_of_it(project: Path, tmp_path: Path) -> None:
    """A committed PKG-INFO that links to a file outside the checkout: named in the notes, its text nowhere."""
    secret = tmp_path / "secret"
    secret.write_text("Metadata-Version: 2.1\nName: secret\nVersion: 6.6.6\nSummary: the secret token\n")
    repository = tmp_path / "linkpkg"
    (repository / "linkpkg").mkdir(parents=True)
    (repository / "linkpkg/__init__.py").write_text("")
    (repository / "pyproject.toml").write_text(_pyproject("linkpkg"))
    (repository / "PKG-INFO").symlink_to(secret)
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    rev = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    path, notes = draft_recipe(SourceGiven(git=repository.as_uri(), rev=rev), project)
    assert notes == [f"PKG-INFO: a link (to {shown(str(secret), quoted=True)}), not followed — nothing "
                     "was read from it"]  # fmt: skip
    text = path.read_text(encoding="utf-8")
    assert "secret" not in text.replace(str(secret), "") and "6.6.6" not in text
    assert yaml.safe_load(text)["name"] == "linkpkg"


def test_a_recipe_reached_through_a_link_is_not_completed(project: Path, tmp_path: Path) -> None:
    """recipes/linked is a link to a recipe folder elsewhere, whose recipe is sound: it is neither read nor
    rewritten."""
    outside = shutil.copytree(project / "recipes/cuprobe", tmp_path / "outside")
    recipe = (outside / "recipe.yaml").read_text(encoding="utf-8").replace("name: cuprobe", "name: linked")
    (outside / "recipe.yaml").write_text(recipe, encoding="utf-8")
    (project / "recipes/linked").symlink_to(outside)
    binary = {"member": "cuprobe/_fft.so", "module": "cuprobe._runtime", "needed": ["libcufft.so.11"]}
    entry = {"wheel": "w.whl", "dist_name": "linked-cuda12x", "cuda": 12, "platform": "linux-x86_64"}
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"wheels": [{**entry, "binaries": [binary]}]}))
    assert main(["--root", str(project), "recipe", "--from-report", str(report), "--recipe", "linked"]) == 2
    assert (outside / "recipe.yaml").read_text(encoding="utf-8") == recipe


def test_a_package_outside_the_usual_roots_is_the_shallowest_real_one_and_no_link_is_taken(tmp_path: Path) -> None:
    tree, elsewhere = tmp_path / "tree", tmp_path / "elsewhere"
    for folder in (tree / "a" / "b" / "pkg" / "core", tree / "z" / "pkg" / "core", elsewhere / "pkg" / "core"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (tree / "y").mkdir()
    (tree / "y" / "pkg").symlink_to(elsewhere / "pkg")  # shallower than z/, sorted before it, and a link
    assert sources.package_dir(tree, "pkg.core") == Path("z/pkg/core")
    assert sources.package_dir(tree, "other") is None
