"""A network that drops connections: a download is picked up where it broke off (or begun again where the server
serves no ranges), pip's resolution is tried again, and a failure that lasts, or an answer such as 404, ends the
step with one line and nothing written. A real HTTP server on loopback drops the connections; only the pauses
between tries are shortened."""

from __future__ import annotations

import hashlib
import http.server
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from wheelfactory import host
from wheelfactory.errors import NetworkFailure, ToolFailure
from wheelfactory.toolkit import wheels
from wheelfactory.untrusted import archives

from .conftest import serving
from .wheelbytes import make_wheel

BODY = bytes(range(256)) * (3 * 4096)  # 3 MiB, no two MiB alike
CUT = 1 << 20  # where a dropped transfer breaks off


@dataclass
class Flaky:
    """What the server holds (path → bytes), how many of the next requests for a path it fails (`drops`: cut off
    after CUT bytes, or `silent`: closed before any answer), whether it serves ranges, and what it was asked."""

    files: dict[str, bytes]
    drops: dict[str, int] = field(default_factory=dict)
    silent: bool = False
    ranges: bool = True
    asked: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, Range header
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        flaky = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def do_GET(self) -> None:
                self._answer(head=False)

            def _answer(self, head: bool) -> None:
                path = self.path.split("?")[0]
                wanted = self.headers.get("Range", "")
                with flaky.lock:
                    flaky.asked.append((self.command, path, wanted))
                    dropping = not head and flaky.drops.get(path, 0) > 0
                    if dropping:
                        flaky.drops[path] -= 1
                body = flaky.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                self.close_connection = True
                if dropping and flaky.silent:
                    return
                start, end = 0, len(body) - 1
                found = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted) if flaky.ranges else None
                if found is not None:
                    start = int(found.group(1))
                    end = min(int(found.group(2)) if found.group(2) else end, end)
                    if start > end:  # asks for nothing the file has
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(end - start + 1))
                self.send_header("Accept-Ranges", "bytes" if flaky.ranges else "none")
                self.send_header("Connection", "close")  # each request its own connection: a drop hits that one
                self.send_header("Content-Type", "text/html" if path.endswith("/") else "application/octet-stream")
                self.end_headers()
                if head:
                    return
                part = body[start : end + 1]
                self.wfile.write(part[:CUT] if dropping else part)

        return Handler


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pauses between tries are a minute long in a real build; the tries themselves are the real thing."""
    monkeypatch.setattr(host, "NETWORK_PAUSES_S", (0.05, 0.05, 0.05))


@pytest.fixture
def flaky() -> Iterator[tuple[Flaky, str]]:
    server = Flaky({"/file.bin": BODY})
    with serving(server.handler()) as url:
        yield server, url


def _gets(server: Flaky, path: str) -> list[str]:
    return [wanted for method, asked, wanted in server.asked if method == "GET" and asked == path]


def test_a_dropped_download_is_picked_up_where_it_broke_off(flaky: tuple[Flaky, str], tmp_path: Path) -> None:
    server, url = flaky
    server.drops["/file.bin"] = 2
    target = archives.download(url + "file.bin", tmp_path / "file.bin", hashlib.sha256(BODY).hexdigest())
    assert target.read_bytes() == BODY
    assert _gets(server, "/file.bin") == ["", f"bytes={CUT}-", f"bytes={2 * CUT}-"]
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


def test_a_server_without_ranges_is_read_again_from_the_start(flaky: tuple[Flaky, str], tmp_path: Path) -> None:
    server, url = flaky
    server.ranges, server.drops["/file.bin"] = False, 1
    target = archives.download(url + "file.bin", tmp_path / "file.bin", hashlib.sha256(BODY).hexdigest())
    assert target.read_bytes() == BODY
    assert _gets(server, "/file.bin") == ["", f"bytes={CUT}-"]  # asked for the rest, given the whole


def test_a_network_that_stays_down_ends_the_download_after_its_tries_and_leaves_nothing(
    flaky: tuple[Flaky, str], tmp_path: Path
) -> None:
    server, url = flaky
    server.silent, server.drops["/file.bin"] = True, 100
    with pytest.raises(NetworkFailure, match=r"file\.bin"):
        archives.download(url + "file.bin", tmp_path / "file.bin")
    assert len(_gets(server, "/file.bin")) == len(host.NETWORK_PAUSES_S) + 1
    assert list(tmp_path.iterdir()) == []


def test_an_answer_such_as_404_is_not_asked_again(flaky: tuple[Flaky, str], tmp_path: Path) -> None:
    server, url = flaky
    with pytest.raises(ToolFailure, match="HTTP 404") as failure:
        archives.download(url + "missing.bin", tmp_path / "missing.bin")
    assert not isinstance(failure.value, NetworkFailure)
    assert len(_gets(server, "/missing.bin")) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Flaky, str, str]]:
    """A package index of one wheel, with no configuration of this machine's pip in the way (its find-links and
    extra indexes)."""
    wheel = make_wheel(tmp_path, "flakypkg-1.0-py3-none-any.whl", {"flakypkg/__init__.py": b""})
    data = wheel.read_bytes()
    page = f'<a href="/files/{wheel.name}#sha256={hashlib.sha256(data).hexdigest()}">{wheel.name}</a>'
    server = Flaky({"/simple/flakypkg/": page.encode(), f"/files/{wheel.name}": data}, silent=True)
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    with serving(server.handler()) as url:
        yield server, url, wheel.name


def test_pip_s_resolution_is_tried_again_when_the_server_drops_the_connection(
    index: tuple[Flaky, str, str],
) -> None:
    server, url, name = index
    server.drops[f"/files/{name}"] = 2
    options = ["--index-url", url + "simple", "--retries", "0"]  # pip's own retries spent at once
    (picked,) = wheels.resolve(["flakypkg"], options, "resolving flakypkg")
    assert picked.filename == name
    # Each try reads the page, then the wheel's METADATA through range requests (fast-deps), not the wheel whole.
    assert len(_gets(server, "/simple/flakypkg/")) == 3
    assert all(wanted.startswith("bytes=") for wanted in _gets(server, f"/files/{name}"))


def test_pip_s_resolution_fails_at_once_where_the_index_answers_no(index: tuple[Flaky, str, str]) -> None:
    server, url, _ = index
    options = ["--index-url", url + "simple", "--retries", "0"]
    with pytest.raises(ToolFailure) as failure:
        wheels.resolve(["otherpkg"], options, "resolving otherpkg")
    assert not isinstance(failure.value, NetworkFailure)
    assert len(_gets(server, "/simple/otherpkg/")) == 1
