"""Reading what a build made: wheel files (wheelfile) and the binaries inside them, ELF (elf) and PE (pe)."""
