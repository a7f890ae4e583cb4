"""What the factory knows of PyTorch, for packages built with torch.utils.cpp_extension: what installing a torch
release brings (its exact pins on NVIDIA's wheels, which the smoke layouts must hold), and the per-(torch, CUDA)
index pages their wheels are published on beside PyPI."""
