"""multipkgx: the package that reaches the CUDA runtime, through its _runtime module when asked."""


def runtime_version() -> int:
    from ._runtime import runtime_version as version

    return version()
