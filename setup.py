"""The one native module, declared here because pyproject.toml's ext-modules table is still experimental.

search/_scan.c holds the verification kernels (plain C against the CPython API), built by the machine's C
compiler at install. `optional`: without a compiler the install still succeeds and search verifies in
Python (search/verify.py says which engine runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "codewell.search._scan", sources=["src/codewell/search/_scan.c"], extra_compile_args=["-O2"], optional=True
        )
    ]
)
