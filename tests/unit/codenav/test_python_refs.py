"""Python find_references: what the file says about the receiver of `obj.name` (codenav/python_refs.py).

Each rule on a small real-looking package in a real git repository, through CodeNavService.find_references.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.gitfixtures import make_repo, register_local_repo

FEEDS = {
    "feeds/parser.py": (
        "class Formatter:\n"  # 1
        "    def feed(self, text):\n"
        "        return text\n"
        "\n"
        "\n"  # 5
        "class Parser:\n"
        "    def feed(self, data):\n"
        "        return data\n"
        "\n"
        "\n"  # 10
        "def render(lines):\n"
        "    formatter = Formatter()\n"
        "    for line in lines:\n"
        "        formatter.feed(line)\n"
        "    return formatter\n"  # 15
        "\n"
        "\n"
        "def parse(chunks, parser: Parser):\n"
        "    for chunk in chunks:\n"
        "        parser.feed(chunk)\n"  # 20
        "    return parser\n"
        "\n"
        "\n"
        "def pump(source, sink):\n"
        "    sink.feed(source)\n"  # 25
    ),
    "feeds/reader.py": (
        "from feeds.parser import Parser\n"  # 1
        "\n"
        "\n"
        "class Reader:\n"
        "    def __init__(self):\n"  # 5
        "        self._parser = Parser()\n"
        "\n"
        "    def read(self, data):\n"
        "        self._parser.feed(data)\n"
    ),
}


@pytest.fixture
def nav(runtime: Runtime) -> CodeNavService:
    return runtime.get(CodeNavService)


def refs(nav: CodeNavService, repo: str, path: str, symbol: str) -> list[tuple[str, int]]:
    found = nav.find_references(INTERNAL, repo, path, symbol, limit=100)
    if found.text_matches:
        return []  # no identifier references: the answer lists mere mentions instead
    return [(f.path, line) for f in found.files for line, _, _ in f.lines]


def test_receiver_built_annotated_or_assigned_to_self_decides(
    runtime: Runtime, nav: CodeNavService, tmp_path: Path
) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "feeds", FEEDS), "acme/feeds")
    # Two classes define `feed`, so an object of unknown type (`sink`) counts for neither; but `formatter =
    # Formatter()` and `parser: Parser` say which class it is, and so does `self._parser = Parser()` in the class.
    assert refs(nav, "acme/feeds", "feeds/parser.py", "Formatter.feed") == [("feeds/parser.py", 14)]
    assert refs(nav, "acme/feeds", "feeds/parser.py", "Parser.feed") == [
        ("feeds/parser.py", 20),
        ("feeds/reader.py", 9),
    ]


NET = {
    "net/channel.py": (
        "from http.client import HTTPConnection\n"  # 1
        "\n"
        "\n"
        "class Channel:\n"
        "    def connect(self, address):\n"  # 5
        "        self.address = address\n"
        "\n"
        "\n"
        "def open_channel(address):\n"
        "    channel = Channel()\n"  # 10
        "    channel.connect(address)\n"
        "    return channel\n"
        "\n"
        "\n"
        "def probe(host):\n"  # 15
        "    conn = HTTPConnection(host)\n"
        "    conn.connect()\n"
        "    return conn\n"
    ),
}


def test_receiver_of_a_class_the_repository_does_not_define_is_not_a_reference(
    runtime: Runtime, nav: CodeNavService, tmp_path: Path
) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "net", NET), "acme/net")
    # `connect` is defined once in the repository, yet `conn` is a library's HTTPConnection: not Channel's member.
    assert refs(nav, "acme/net", "net/channel.py", "Channel.connect") == [("net/channel.py", 11)]


STREAMS = {
    "io2/streams.py": (
        "class Stream:\n"  # 1
        "    def flush(self):\n"
        "        return None\n"
        "\n"
        "\n"  # 5
        "class Buffered(Stream):\n"
        "    def flush(self):\n"
        "        self.pending = []\n"
        "        super().flush()\n"
        "\n"  # 10
        "\n"
        "class Compressed(Buffered):\n"
        "    def flush(self):\n"
        "        super(Compressed, self).flush()\n"
    ),
}


def test_super_calls_the_next_definition_up(runtime: Runtime, nav: CodeNavService, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "io2", STREAMS), "acme/io2")
    # `super().flush()` in Buffered runs Stream.flush; `super(Compressed, self).flush()` runs Buffered.flush.
    assert refs(nav, "acme/io2", "io2/streams.py", "Stream.flush") == [("io2/streams.py", 9)]
    assert refs(nav, "acme/io2", "io2/streams.py", "Buffered.flush") == [("io2/streams.py", 14)]
    assert refs(nav, "acme/io2", "io2/streams.py", "Compressed.flush") == []


ESCAPES = {
    "text/escape.py": (
        "import re\n"  # 1
        "\n"
        "PATTERN = re.compile(r'[<>&]')\n"
        "\n"
        "\n"  # 5
        "def escape(text):\n"
        "    def replace(match):\n"
        "        return '&#%d;' % ord(match.group(0))\n"
        "\n"
        "    return PATTERN.sub(replace, text)\n"  # 10
        "\n"
        "\n"
        "def rewrite(text, replace):\n"
        "    return replace(text)\n"
    ),
}


def test_function_nested_in_a_function_is_seen_only_there(
    runtime: Runtime, nav: CodeNavService, tmp_path: Path
) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "text", ESCAPES), "acme/text")
    # The parameter `replace` of another function is not the nested function.
    assert refs(nav, "acme/text", "text/escape.py", "replace") == [("text/escape.py", 10)]


POOL = {
    "pool/workers.py": (
        "import threading\n"  # 1
        "\n"
        "\n"
        "class Worker:\n"
        "    def __init__(self):\n"  # 5
        "        self._lock = threading.RLock()\n"
        "\n"
        "    def release(self):\n"
        "        self._lock.release()\n"
        "\n"  # 10
        "\n"
        "class Pool(Worker):\n"
        "    def drain(self, worker):\n"
        "        worker.release()\n"
        "        self._lock.release()\n"  # 15
        "\n"
        "    def stop(self, worker: Worker):\n"
        "        worker.release()\n"
    ),
}


def test_untyped_parameters_and_attributes_of_library_types(
    runtime: Runtime, nav: CodeNavService, tmp_path: Path
) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "pool", POOL), "acme/pool")
    # `self._lock` is a library RLock (assigned in the class, or in a base for Pool), not a Worker; an unannotated
    # parameter's type is unknown, an annotated one's is known.
    assert refs(nav, "acme/pool", "pool/workers.py", "Worker.release") == [("pool/workers.py", 18)]


LOGS = {
    "logs/__init__.py": (
        "class Manager:\n"  # 1
        "    def lookup(self, name):\n"
        "        return name\n"
        "\n"
        "\n"  # 5
        "class Logger:\n"
        "    def reset(self):\n"
        "        self.lookup = {}\n"
        "\n"
        "    def find(self, name):\n"  # 10
        "        return self.lookup.get(name)\n"
        "\n"
        "\n"
        "class Adapter:\n"
        "    def find(self, name):\n"  # 15
        "        return Logger.lookup\n"
        "\n"
        "\n"
        "registry = Manager()\n"
    ),
    "logs/config.py": (
        "import logs\n"  # 1
        "from logs import helpers\n"
        "\n"
        "\n"
        "def configure(name):\n"  # 5
        "    manager = logs.registry\n"
        "    helpers.lookup(name)\n"
        "    return manager.lookup(name)\n"
    ),
    "logs/helpers.py": "def lookup(name):\n    return name\n",
}


def test_stores_unrelated_classes_modules_and_module_attributes(
    runtime: Runtime, nav: CodeNavService, tmp_path: Path
) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "logs", LOGS), "acme/logs")
    # Manager.lookup, the only definition of the name: `self.lookup = {}` stores an instance attribute of an
    # unrelated class, `self.lookup` and `Logger.lookup` are that class's, `helpers.lookup` is a module's
    # function; `manager = logs.registry` is the module's `registry = Manager()`, so `manager.lookup` is the method.
    assert refs(nav, "acme/logs", "logs/__init__.py", "Manager.lookup") == [("logs/config.py", 8)]


QUOTING = {
    "web/parse.py": "def quote(text):\n    return text.replace(' ', '%20')\n",
    "web/request.py": (
        "from web.parse import quote\n"  # 1
        "\n"
        "\n"
        "def build(path):\n"
        "    return quote(path)\n"  # 5
        "\n"
        "\n"
        "def split_header(value, quote='\"'):\n"
        "    if quote:\n"
        "        return value.strip(quote)\n"  # 10
        "    return value\n"
    ),
}


def test_a_function_binding_the_name_itself_shadows_the_import(
    runtime: Runtime, nav: CodeNavService, tmp_path: Path
) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "web", QUOTING), "acme/web")
    # The import and the call count; split_header's parameter `quote` hides the imported function there.
    assert refs(nav, "acme/web", "web/parse.py", "quote") == [("web/request.py", 1), ("web/request.py", 5)]


CACHE = {
    "cache/store.py": (
        "from typing import Optional\n"  # 1
        "\n"
        "\n"
        "class Store:\n"
        "    def evict(self, key):\n"  # 5
        "        return key\n"
        "\n"
        "\n"
        "def purge(store: Optional[Store], keys):\n"
        "    for key in keys:\n"  # 10
        "        store.evict(key)\n"
        "\n"
        "\n"
        "def purge_local(keys):\n"
        "    store = {}\n"  # 15
        "    for key in keys:\n"
        "        store.evict(key)\n"
    ),
}


def test_wrapped_annotation_and_literal_values(runtime: Runtime, nav: CodeNavService, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "cache", CACHE), "acme/cache")
    # `Optional[Store]` names Store; `store = {}` is a dict whatever its name.
    assert refs(nav, "acme/cache", "cache/store.py", "Store.evict") == [("cache/store.py", 11)]
