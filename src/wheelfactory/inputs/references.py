"""Strings from the inputs that reach other programs — container image references (docker/podman, cibuildwheel's
configuration), CI runner labels (`runs-on`), git URLs (git clone) — checked against their grammars, so that
nothing but a well-formed value ever gets there. Each check returns None for a good value, else what is wrong.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# The reference grammar of the OCI distribution spec (distribution/reference): [domain[:port]/]path[:tag][@digest].
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE_RE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$", re.ASCII
)
MAX_IMAGE_LENGTH = 255

# Runner labels are free-form for self-hosted runners; these characters cover GitHub's own and usual custom ones.
_RUNNER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", re.ASCII)
MAX_RUNNER_LENGTH = 100

_HOST_RE = re.compile(rf"^{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*$", re.ASCII)
_USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", re.ASCII)
# A path of a repository: no option-like or control characters, nothing a shell or git would read as syntax.
_REPO_PATH_RE = re.compile(r"^[A-Za-z0-9._~/+-]+$", re.ASCII)
_SCP_RE = re.compile(r"^(?P<user>[^@/:]+)@(?P<host>[^:/]+):(?P<path>[^:].*)$")
_COMMIT_RE = re.compile(r"[0-9a-f]{40}", re.ASCII)
COMMIT_HINT = "a git source needs rev: a full 40-digit commit SHA (tags and branches move)"


def image_problem(value: str) -> str | None:
    """What is wrong with a container image reference (registry/name:tag@digest), if anything."""
    if len(value) > MAX_IMAGE_LENGTH:
        return f"{len(value)} characters, more than an image reference may have ({MAX_IMAGE_LENGTH})"
    first, _, rest = value.partition("/")
    # As docker reads it: the first component is a registry only when it looks like a host (a dot, a port).
    registry = rest and ("." in first or ":" in first or first == "localhost")
    if not _IMAGE_RE.match(value) or (rest and not registry and first != first.lower()):
        return "not a container image reference (registry/name:tag or name@sha256:…, lowercase name, no spaces)"
    return None


def runner_problem(value: str) -> str | None:
    """What is wrong with a CI runner label, if anything."""
    if len(value) > MAX_RUNNER_LENGTH:
        return f"{len(value)} characters, more than a runner label here may have ({MAX_RUNNER_LENGTH})"
    if not _RUNNER_RE.match(value):
        return "a runner label here is letters, digits, '.', '_' and '-', starting with a letter or digit"
    return None


# GitHub-hosted runner labels, whose machine is known: an -arm suffix is an Arm runner, none an x86_64 one.
_HOSTED_RUNNER_RE = re.compile(r"^(ubuntu|windows)-(latest|[0-9][0-9.]*)(?P<arm>-arm)?$")


def names_machine(value: str, words: tuple[str, ...]) -> str | None:
    """The first of `words` that `value` (an image or a runner label) names as a word of its own, if any."""
    lowered = value.lower()
    return next((w for w in words if re.search(rf"(?<![a-z0-9]){re.escape(w)}(?![a-z0-9])", lowered)), None)


def hosted_runner_is_arm(label: str) -> bool | None:
    """Whether a GitHub-hosted runner label is an Arm machine; None for other labels."""
    hosted = _HOSTED_RUNNER_RE.match(label)
    return None if hosted is None else hosted["arm"] is not None


def git_url_problem(value: str) -> str | None:
    """What is wrong with a git URL, if anything: https://host/path, ssh://[user@]host[:port]/path,
    user@host:path, or file:///path — an ordinary host, nothing git could take for an option."""
    scp = _SCP_RE.match(value) if "://" not in value else None
    if scp:
        user, host, path = scp["user"], scp["host"], scp["path"]
    else:
        try:
            parts = urlsplit(value)
            port = parts.port  # raises on a port that is not a number
        except ValueError:
            return "not a URL git can fetch"
        if parts.scheme not in ("https", "ssh", "file"):
            return "use an https://, ssh://, user@host:path or file:// URL"
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost"):
                return "a file:// URL names a local path (file:///path)"
            host, user, path = "localhost", None, parts.path
        else:
            host, user, path = parts.hostname or "", parts.username, parts.path
            if parts.password is not None:
                return "a URL with a password puts a secret in the recipe — use a credential helper"
            if port is not None and not 0 < port < 65536:
                return f"port {port} is out of range"
        if parts.query or parts.fragment:
            return "a git URL has no query or fragment"
    if not _HOST_RE.match(host):
        return f"{host!r} is not an ordinary host name"
    if user is not None and not _USER_RE.match(user):
        return f"{user!r} is not an ordinary user name"
    if not path.strip("/") or not _REPO_PATH_RE.match(path) or any(p.startswith("-") for p in path.split("/")):
        return "the repository path may hold only letters, digits and . _ ~ / + -"
    return None


def commit_problem(value: str) -> str | None:
    """What is wrong with a git source's rev, if anything: it is a full commit SHA, 40 lowercase hex digits —
    nothing a branch or tag could move, nor a path."""
    return None if _COMMIT_RE.fullmatch(value) else COMMIT_HINT
