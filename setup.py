"""The native modules, declared here because pyproject.toml's ext-modules table is still experimental.

Plain C against the CPython API, built by the machine's C compiler at install: search/_scan.c holds the
verification kernels, search/_build.c the trigram work of the search index build, nls/_tokenize.c the term
counting of the nls index build, codenav/_lex.c the C symbol scanner. `optional`: without a compiler the
install still succeeds and each falls back to Python or tree-sitter (search/verify.py,
search/index/builder.py, nls/native.py and codenav/native.py say which engine runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "codewell.search._scan", sources=["src/codewell/search/_scan.c"], extra_compile_args=["-O2"], optional=True
        ),
        # search/_build.c: the trigram extraction and posting-list merge of the search index build
        # (search/index/builder.py falls back to numpy and pyroaring without it).
        Extension(
            "codewell.search._build",
            sources=["src/codewell/search/_build.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        # nls/_tokenize.c: term counting for the nls index build (nls/index.py falls back to Python without it).
        Extension(
            "codewell.nls._tokenize",
            sources=["src/codewell/nls/_tokenize.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        # codenav/_lex.c: the C symbol scanner (codenav/native.py falls back to tree-sitter without it). It writes
        # its rows into the index with SQLite's C API: the library Python's sqlite3 module uses (header: Debian's
        # libsqlite3-dev).
        Extension(
            "codewell.codenav._lex",
            sources=["src/codewell/codenav/_lex.c"],
            extra_compile_args=["-O2"],
            libraries=["sqlite3"],
            optional=True,
        ),
    ]
)
