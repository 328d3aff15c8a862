"""The compiled parts of cake-core, two accelerators of what Python also does: the scanner of
well-formed ``.cake`` text (``cake_core/ir/_scan.c``, beside ``cake_core/ir/lexer.py``) and the
constructor of the records the parser and verifier build by the thousand (``cake_core/ir/_make.c``,
beside ``cake_core/ir/fastmake.py``). Both are optional: where no C compiler or Python headers are
found, the install goes on without them and Python does the work. Everything else about the package
is in ``pyproject.toml``."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("cake_core.ir._scan", ["cake_core/ir/_scan.c"], optional=True),
        Extension("cake_core.ir._make", ["cake_core/ir/_make.c"], optional=True),
    ]
)
