"""A build that takes an image's name removes the image it replaced (image.remove_replaced), unless another name
or a container still holds it: with Docker, on images built FROM scratch here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from wheelfactory.image import image_id, remove_replaced

TAG = "wheelfactory-test-replaced:latest"
CONTAINER = "wheelfactory-test-replaced"
BUILT: list[str] = []  # every image the test built, removed at its end


def _built(context: Path, content: str) -> str:
    context.mkdir(exist_ok=True)
    (context / "content").write_text(content)
    (context / "Dockerfile").write_text("FROM scratch\nCOPY content /content\n")
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    subprocess.run(["docker", "build", "--quiet", "--tag", TAG, str(context)], check=True, capture_output=True, env=env)
    found = image_id(TAG)
    assert found is not None
    BUILT.append(found)
    return found


def _exists(image: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0


def test_the_image_a_build_replaced_is_removed_unless_something_holds_it(docker: None, tmp_path: Path) -> None:
    held = f"{TAG.split(':')[0]}:held"
    try:
        first = _built(tmp_path / "a", "first")
        remove_replaced(TAG, first)  # nothing replaced it: it stays
        assert _exists(first)
        second = _built(tmp_path / "a", "second")
        remove_replaced(TAG, first)
        assert not _exists(first) and _exists(second)
        subprocess.run(["docker", "tag", second, held], check=True)
        third = _built(tmp_path / "a", "third")
        remove_replaced(TAG, second)  # another name holds it
        assert _exists(second) and _exists(third)
        subprocess.run(["docker", "create", "--name", CONTAINER, third, "/content"], check=True, capture_output=True)
        fourth = _built(tmp_path / "a", "fourth")
        remove_replaced(TAG, third)  # a container holds it
        assert _exists(third) and _exists(fourth)
        assert image_id("wheelfactory-test-no-such-image:latest") is None
    finally:
        subprocess.run(["docker", "rm", CONTAINER], capture_output=True)
        subprocess.run(["docker", "image", "rm", TAG, held, *BUILT], capture_output=True)
