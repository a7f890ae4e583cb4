"""The CUDA toolkit a build gets: provisioned from NVIDIA's wheels and archives or Debian's packages (provision,
redist, debian), the MSVC a Windows build runs with (msvc), and the environment the build sees (buildenv). Files
it fetches are unpacked through the untrusted-bytes layer (wheelfactory.untrusted.archives)."""
