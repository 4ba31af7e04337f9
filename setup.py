"""Only the compiled part lives here; everything else is in setup.cfg."""
from setuptools import Extension, setup

# optional: without a compiler the codec and the store fall back to zlib and numpy (slower, same results).
setup(ext_modules=[Extension("rmq_common._native", ["rmq_common/_native.c"], depends=["rmq_common/crc32.h"],
                             optional=True),
                   Extension("rmq_common._encode", ["rmq_common/_encode.c"], depends=["rmq_common/crc32.h"],
                             optional=True),
                   Extension("store._index", ["store/_index.c"], optional=True),
                   Extension("remoting._frame", ["remoting/_frame.c"], optional=True)])
