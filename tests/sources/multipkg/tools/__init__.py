# A top-level folder that is no package of the wheel: auto-discovery would refuse the flat layout because of it.
