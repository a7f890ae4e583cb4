"""Code that the factory ships inside the wheels it builds and runs in their users' environments: standard
library only, on every CPython a wheel serves."""
