from setuptools import setup
setup(name="broken", version="1.0", packages=["broken"])
