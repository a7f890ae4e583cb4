"""The CUDA runtime's version, through an extension module built once for every Python 3.10 and newer."""
