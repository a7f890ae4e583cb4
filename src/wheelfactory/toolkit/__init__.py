"""The CUDA toolkit a build gets: provisioned from NVIDIA's wheels and archives or Debian's packages (provision,
redist, debian), files fetched whole and unpacked safely (archives), the MSVC a Windows build runs with (msvc),
and the environment the build sees (buildenv)."""
