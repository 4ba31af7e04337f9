"""Only the compiled part lives here; everything else is in setup.cfg."""
from setuptools import Extension, setup

# optional: without a compiler the store falls back to zlib and numpy (slower, same results).
setup(ext_modules=[Extension("store._native", ["store/_native.c"], depends=["store/crc32.h"], optional=True),
                   Extension("store._encode", ["store/_encode.c"], depends=["store/crc32.h"],
                             optional=True),
                   Extension("store._index", ["store/_index.c"], optional=True),
                   Extension("remoting._frame", ["remoting/_frame.c"], optional=True)])
