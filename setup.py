"""Only the compiled part lives here; everything else is in setup.cfg."""
from setuptools import Extension, setup

# optional: without a compiler the store falls back to zlib per body (slower, same results).
setup(ext_modules=[Extension("store._body_crc", ["store/_body_crc.c"], optional=True)])
