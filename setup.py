"""The one compiled part of cake-core: the C scanner of well-formed ``.cake`` text
(``cake_core/ir/_scan.c``). It is optional: where no C compiler or Python headers are found, the
install goes on without it and the Python scanner does all the work (see ``cake_core/ir/lexer.py``).
Everything else about the package is in ``pyproject.toml``."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cake_core.ir._scan", ["cake_core/ir/_scan.c"], optional=True)])
