"""NlsService: natural-language search (BM25 over code chunks) across the repositories an actor may read.

Each indexed revision gets a chunk index beside the trigram shard (`on_indexed`, search's index listener),
under `<data dir>/nls/<repo id>/<commit>/`, loaded lazily and cached. A question is reduced to its content
words (question and stop words dropped, identifiers kept whole and split, stemmed) and ranked by BM25 times
boosts for exact identifiers, phrases, symbol definitions and path hits. A revision without an nls index
(not indexed, or still building) falls back to keyword search over it, and the answer says so.
"""

from __future__ import annotations

import functools
import logging
import mmap
import os
import re
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import pygit2

from codewell.codenav.service import CodeNavService
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound, StorageUnavailable, Unavailable
from codewell.jobs.service import JobService
from codewell.nls.dense import DenseRanker, StaticRanker
from codewell.nls.index import (
    BYTE_END,
    BYTE_START,
    END,
    MAX_FILE_BYTES,
    PATH,
    QUESTION_WORDS,
    START,
    STOP_WORDS,
    NlsIndex,
    SourceFile,
    build,
    decode_lines,
    is_current,
    load,
    split_identifier,
    terms,
)
from codewell.repos.git import walk_blobs
from codewell.repos.service import Repo, RepoService
from codewell.search.cluster import Reply, coverage, preferred_holders
from codewell.search.service import RevisionFiles, SearchService
from codewell.search.wire import decode_actor, decode_ids, encode_actor, encode_ids

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = [
    "CHUNKS_PER_FILE",
    "FILES_PER_PAGE",
    "MAX_QUESTION_WORDS",
    "ChunkLines",
    "NlsHit",
    "NlsResults",
    "NlsService",
    "named_repos",
    "shown_hits",
]

log = logging.getLogger(__name__)

FILES_PER_PAGE = 15
CHUNKS_PER_FILE = 3
MAX_COUNT = 100
MAX_QUESTION_WORDS = 32
MAX_QUESTION_CHARS = 2000
_CACHE = 8
_CANDIDATES = 200
# The build lets go of the shard's pages it read every this many bytes (_Content).
_DROP_BYTES = 64 << 20
# How long the web tier waits for the searcher replicas' natural-language answers.
REPLICA_SECONDS = 10.0
_DEFINITION_KINDS = frozenset({"function", "method", "class", "struct", "interface", "enum"})
_FILTER = re.compile(r"(?<!\S)(repo|file|rev|count):(\S+)")
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*[A-Za-z0-9_]|[A-Za-z_]")
# What may be a repository's name in a question: path-like words (`spf13/cobra`, `github.com/pallets/click`).
_MENTION = re.compile(r"[\w.-]*\w(?:/[\w.-]*\w)*")


class ChunkLines:
    """A hit's lines, decoded the first time they are asked for (ranking needs none of them): from search's shard
    (format 5), the texts the index stores (formats 3 and 4), or the blob (format 2)."""

    __slots__ = ("_lines", "_read")

    def __init__(self, read: Callable[[], list[str]] | None, lines: list[str] | None = None) -> None:
        self._read = read
        self._lines = lines or []

    @classmethod
    def known(cls, lines: list[str]) -> ChunkLines:
        return cls(None, lines)

    @property
    def loaded(self) -> bool:
        return self._read is None

    def get(self) -> list[str]:
        if self._read is not None:
            self._lines, self._read = self._read(), None
        return self._lines


@dataclass(frozen=True, slots=True)
class NlsHit:
    repo: str
    path: str
    commit: str
    start: int
    end: int
    score: float
    text: ChunkLines
    symbols: tuple[str, ...] = ()

    @property
    def lines(self) -> list[str]:
        """The chunk's lines (without their CR), decoded on first use."""
        return self.text.get()


@dataclass(slots=True)
class NlsResults:
    """Ranked chunks, the terms searched for, and notes (fallbacks, cuts) to show before the blocks."""

    terms: list[str]
    hits: list[NlsHit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    limit: int = FILES_PER_PAGE
    count_given: bool = False  # count: was asked for (the answer's size budget grows with it: nls/render.py)
    named: list[str] = field(default_factory=list)  # repositories the question names: their hits come first


@dataclass(frozen=True, slots=True)
class _Question:
    words: list[str]  # content words as typed (identifiers whole)
    identifiers: list[str]  # compound identifiers (snake, camel, dotted) as typed
    tokens: list[str]  # index tokens
    repo: str | None
    file: re.Pattern[str] | None
    rev: str | None
    count: int
    cut: bool
    text: str = ""  # the question without its filters, whitespace collapsed (what the dense ranking embeds)
    count_given: bool = False  # count: was in the question (the answer may then be longer: nls/render.py)


def _is_identifier(word: str) -> bool:
    return "_" in word or "." in word or len(split_identifier(word)) > 1


def _count_and_file(filters: dict[str, str]) -> tuple[int, re.Pattern[str] | None]:
    count = FILES_PER_PAGE
    if "count" in filters:
        raw = filters["count"]
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_COUNT:
            raise InvalidInput(f"count: must be a number from 1 to {MAX_COUNT}", hint="e.g. count:30")
        count = int(raw)
    pattern = None
    if "file" in filters:
        try:
            pattern = re.compile(filters["file"])
        except re.error as exc:
            raise InvalidInput(f"file: is not a valid regular expression ({exc})", hint=r"e.g. file:\.py$") from None
    return count, pattern


def _content_words(text: str) -> list[str]:
    """Words of the question minus question and stop words; identifiers (snake, camel, dotted) always stay."""
    words: list[str] = []
    for word in _WORDS.findall(text):
        lowered = word.lower()
        if not _is_identifier(word) and (lowered in STOP_WORDS or lowered in QUESTION_WORDS or len(word) < 2):
            continue
        if word not in words:
            words.append(word)
    return words


def _words_and_tokens(text: str) -> tuple[list[str], list[str], bool]:
    """Content words of `text` (at most MAX_QUESTION_WORDS), their index tokens, and whether words were cut."""
    words = _content_words(text)
    cut = len(words) > MAX_QUESTION_WORDS
    words = words[:MAX_QUESTION_WORDS]
    tokens: list[str] = []
    for w in words:
        for t in terms(w.replace(".", " ")) + ([w.lower()] if _is_identifier(w) and "." not in w else []):
            if t not in tokens:
                tokens.append(t)
    return words, tokens, cut


def parse_question(question: str) -> _Question:
    """Filters and content words of `question`; InvalidInput when nothing is left to search for."""
    if len(question) > MAX_QUESTION_CHARS:
        question = question[:MAX_QUESTION_CHARS]
        cut = True
    else:
        cut = False
    filters: dict[str, str] = {}
    for m in _FILTER.finditer(question):
        filters[m.group(1)] = m.group(2)
    text = _FILTER.sub(" ", question)
    if not text.strip():
        raise InvalidInput(
            "the question is empty" if not filters else "the question has filters but nothing to search for",
            hint="ask in words, e.g. where are http requests retried? repo:myrepo",
        )
    words, tokens, words_cut = _words_and_tokens(text)
    if not tokens:
        raise InvalidInput(
            "the question holds only question and stop words",
            hint="name what the code does or is called, e.g. parse config file",
        )
    count, pattern = _count_and_file(filters)
    return _Question(
        words=words,
        identifiers=[w for w in words if _is_identifier(w)],
        tokens=tokens,
        repo=filters.get("repo"),
        file=pattern,
        rev=filters.get("rev"),
        count=count,
        cut=cut or words_cut,
        text=" ".join(text.split()),
        count_given="count" in filters,
    )


def _name_suffixes(name: str) -> list[str]:
    """`github.com/spf13/cobra` → itself, `spf13/cobra`, `cobra`: the ways a question may write a repository's name."""
    parts = name.lower().split("/")
    return ["/".join(parts[i:]) for i in range(len(parts))]


def named_repos(text: str, repos: list[Repo]) -> tuple[list[str], str]:
    """The repositories of `repos` the question `text` names, and the text without those names.

    A question names a repository by a tail of its name from a `/` on (`github.com/spf13/cobra`, `spf13/cobra`,
    or `cobra` alone when that last part is at least 3 characters and not a stop or question word: a repository
    called `the` is not named by every question), or by a longer name that ends with the repository's whole name
    (`github.com/spf13/cobra` names a repository registered as `spf13/cobra`); `other/cobra` names neither.
    Cost per repository: one split and one set lookup (10,000 readable repositories: 2.1 ms, measured).
    """
    mentions = {m.group().lower() for m in _MENTION.finditer(text)}
    longer: dict[str, str] = {}  # every tail of a mention → the mention
    for mention in mentions:
        for suffix in _name_suffixes(mention):
            longer.setdefault(suffix, mention)
    lasts = {m.rsplit("/", 1)[-1] for m in mentions}
    named: list[str] = []
    used: set[str] = set()
    for repo in repos:
        name = repo.name.lower()
        last = name.rsplit("/", 1)[-1]
        if last not in lasts:
            continue
        short = len(last) < 3 or last in STOP_WORDS or last in QUESTION_WORDS
        tails = [t for t in _name_suffixes(name) if t in mentions and not (short and t == last)]
        if tails:
            used.update(tails)
        elif name in longer:
            used.add(longer[name])
        else:
            continue
        named.append(repo.name)
    rest = _MENTION.sub(lambda m: " " if m.group().lower() in used else m.group(), text)
    return named, rest


class _Blobs:
    """For an index of format 2 (no stored texts): the blobs of one repository one search needs, each read once."""

    def __init__(self, mirror: Path) -> None:
        self._mirror = mirror
        self._repo: pygit2.Repository | None = None
        self._read: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def read(self, blob: str) -> bytes:
        with self._lock:
            data = self._read.get(blob)
            if data is None:
                if self._repo is None:
                    self._repo = pygit2.Repository(str(self._mirror))
                data = self._read[blob] = self._repo.odb.read(pygit2.Oid(hex=blob))[1]
            return data

    def chunk_lines(self, blob: str, byte_start: int, byte_end: int, count: int) -> list[str]:
        """The `count` lines of the chunk at those bytes of `blob` (only the chunk's bytes are decoded)."""
        return decode_lines(self.read(blob)[byte_start:byte_end], count)


class _ShardFiles:
    """For an index of format 5: where each indexed file's bytes are in search's shard, which stores every file of
    the indexed commit exactly as git has it (the index keeps no texts of its own).

    Made once per index and shard (a shard never changes; a new generation is a new Shard object): each file's
    offset in the shard's content, or -1 for a file the shard holds no bytes of (a symbolic link, nls indexes its
    target path; a file search calls binary for a NUL past nls's 8000-byte test), or for every file when the shard no
    longer holds the commit (its branch moved on and this index is about to be replaced): those come from git.
    """

    def __init__(self, shard: object, index: NlsIndex, stored: RevisionFiles | None) -> None:
        self.shard = shard
        self._content: Any = None if stored is None else stored.shard.content
        self._offsets: list[int] = [-1] * len(index.paths)
        if stored is not None:
            ids = {path: file_id for file_id, path in enumerate(index.paths)}
            for doc in stored.docs:
                file_id = ids.get(stored.path(doc), -1)
                if file_id >= 0 and not stored.skipped(doc):
                    self._offsets[file_id] = stored.span(doc)[0]

    def raw(self, file_id: int, byte_start: int, byte_end: int, blob: str, blobs: _Blobs) -> bytes:
        """Bytes `byte_start:byte_end` of file `file_id` (blob id `blob`): from the shard, else from git."""
        offset = self._offsets[file_id]
        if offset < 0:
            return blobs.read(blob)[byte_start:byte_end]
        return bytes(self._content[offset + byte_start : offset + byte_end])


def _searchable(raw: bytes) -> bytes:
    """A chunk's bytes lower-cased, for the identifier and phrase boosts: their needles (ASCII letters, digits,
    `_`, `.` and single spaces) are found in it exactly when in the chunk's decoded lines joined and lower-cased.
    An ASCII chunk is lower-cased as bytes (its CRs and last newline cannot be part of a match); any other goes the
    long way, since str.lower() maps a few non-ASCII letters to ASCII ones (KELVIN SIGN → k)."""
    if raw.isascii():
        return raw.lower()
    return "\n".join(decode_lines(raw, raw.count(b"\n") + 1)).lower().encode()


def shown_hits(hits: list[NlsHit], limit: int) -> Iterator[NlsHit]:
    """The hits an answer shows, best first: those of the first `limit` files, up to CHUNKS_PER_FILE each."""
    per_file: dict[tuple[str, str], int] = {}
    for hit in hits:
        key = (hit.repo, hit.path)
        if key not in per_file and len(per_file) >= limit:
            continue
        if per_file.get(key, 0) < CHUNKS_PER_FILE:
            per_file[key] = per_file.get(key, 0) + 1
            yield hit


def _source_files(
    mirror: pygit2.Repository,
    commit: str,
    stored: RevisionFiles | None,
    spans: dict[str, list[tuple[int, int, str]]],
) -> Iterator[SourceFile]:
    """Every blob of `commit` with its definitions, in tree order; the bytes from search's shard when it holds
    them (`stored`: the shard was just built, and reading it costs nothing where git inflates every blob again).

    Git is read for what the shard leaves out: symbolic links (nls indexes their target path as a text, as it
    always did), files search calls binary (a NUL anywhere, where nls looks at the first 8000 bytes only), and
    every file of a commit the shard does not hold (`stored` None).
    """
    docs = {} if stored is None else {stored.path(doc): doc for doc in stored.docs}
    content = _Content(stored.content_path) if stored is not None else None
    for path, oid, _mode in walk_blobs(mirror, mirror[commit].peel(pygit2.Tree)):
        doc = docs.get(path)
        data: bytes | memoryview
        if stored is not None and content is not None and doc is not None and stored.skipped(doc) != "binary":
            if stored.skipped(doc) and stored.size(doc) > MAX_FILE_BYTES:
                continue  # too large for nls as well
            data = content.read(*stored.span(doc)) if not stored.skipped(doc) else mirror[oid].peel(pygit2.Blob).data
        else:
            data = mirror[oid].peel(pygit2.Blob).data
        # Popped: each file's definitions are needed once, and the build's memory peaks at its end.
        yield SourceFile(path, str(oid), data, spans.pop(path, []))


class _Content:
    """The shard's content file mapped for one build, its pages let go of every _DROP_BYTES read.

    The shard's own mapping would keep every page the build touched resident in this process (the whole tree's
    bytes, about 1 GB on Linux, counted in its resident set until the end). Dropping them (MADV_DONTNEED on a
    read-only file mapping) costs nothing: they stay in the page cache, and a view still in use reads them again.
    """

    def __init__(self, path: Path) -> None:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            # mmap cannot map an empty file (a shard of empty files only).
            self._map: mmap.mmap | None = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self._read = 0

    def read(self, offset: int, length: int) -> memoryview:
        if self._map is None or not length:
            return memoryview(b"")
        self._read += length
        if self._read >= _DROP_BYTES and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED)
            self._read = 0
        return memoryview(self._map)[offset : offset + length]


class NlsService:
    """Chunk indexes per indexed revision and nls_search over readable repositories."""

    def __init__(self, runtime: Runtime, root: Path) -> None:
        self.runtime = runtime
        self.root = root
        self._guard = threading.Lock()
        self._building: set[tuple[int, str]] = set()
        self._cache: OrderedDict[Path, NlsIndex] = OrderedDict()
        # Per cached index of format 5: where its files are in search's current shard (see _ShardFiles).
        self._shard_files: dict[Path, _ShardFiles] = {}
        # The model of `search.nls.dense`: all-MiniLM (DenseRanker). StaticRanker (static embeddings, nls/static.py)
        # has the same shape; measured against it in docs/nls.md, "Static embeddings", it is not the default.
        self.dense: DenseRanker | StaticRanker = DenseRanker()

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime, runtime.settings.data_dir / "nls")

    @property
    def repos(self) -> RepoService:
        return self.runtime.get(RepoService)

    # --- the cluster: the web tier asks every searcher replica, which answers over what it holds ------------

    def replica_call(self, body: dict[str, Any]) -> dict[str, Any]:
        """A searcher replica's answer to the web tier (the internal API's `/nls`): hits of the repositories it
        holds, in its order; lines for those an answer may show, the others read later from the mirror."""
        search = self.runtime.get(SearchService)
        # One view for what it searches and what it says it holds (a generation may replace it meanwhile).
        ids, names = search.held()
        results = self.search(decode_actor(body["actor"]), str(body["question"]), held=ids)
        shown = {id(hit) for hit in shown_hits(results.hits, max(3 * results.limit, 30))}
        return {
            "hits": [
                [h.repo, names.get(h.repo, -1), h.path, h.commit, h.start, h.end, h.score, list(h.symbols)]
                + ([h.lines] if id(h) in shown else [])
                for h in results.hits
            ],
            "notes": results.notes,
            "held": encode_ids(ids),
        }

    def _search_replicas(self, actor: Actor, question: str, search: SearchService) -> NlsResults:
        q = parse_question(question)  # a malformed question is refused before anything is sent
        targets = self._targets(actor, q)
        named = named_repos(q.text, targets)[0] if q.repo is None else []
        results = NlsResults(terms=[], limit=q.count, count_given=q.count_given, named=named)
        replicas = self.runtime.get(JobService).replicas()
        body = {"actor": encode_actor(actor), "question": question}
        replies = search.fanout().post_all(replicas, "/nls", body, time.monotonic() + REPLICA_SECONDS)
        held: dict[str, np.ndarray] = {}
        answers: list[tuple[str, list[Any]]] = []
        failed: list[Reply] = []
        for reply in replies:
            payload = reply.payload
            if payload is None:
                failed.append(reply)
                continue
            held[reply.replica.name] = decode_ids(str(payload.get("held", "")))
            answers.append((reply.replica.name, list(payload.get("hits", []))))
            for note in payload.get("notes", []):
                if note not in results.notes:
                    results.notes.append(str(note))
        preferred = preferred_holders(held)
        hits: list[NlsHit] = []
        for name, rows in answers:
            for row in rows:
                repo, rid, path, commit, start, end, score, symbols = row[:8]
                if preferred.get(int(rid), name) != name:
                    continue
                lines = (
                    ChunkLines.known([str(x) for x in row[8]])
                    if len(row) > 8
                    else ChunkLines(functools.partial(self._mirror_lines, actor, repo, path, commit, start, end))
                )
                hits.append(NlsHit(repo, path, commit, int(start), int(end), float(score), lines, tuple(symbols)))
        first = frozenset(named)
        hits.sort(key=lambda h: h.repo)
        hits.sort(key=lambda h: (h.repo not in first, -h.score))
        results.hits = hits
        results.terms = parse_question(question).tokens
        readable = np.fromiter((r.id for r in targets), dtype=np.int64)
        missing = coverage(readable, held)
        by_id = {r.id: r.name for r in targets}
        for reply in failed:
            results.notes.append(f"(Searcher {reply.replica.name} {reply.error}: its repositories were not searched.)")
        if missing.size and (failed or not replicas):
            names = sorted(by_id[int(rid)] for rid in missing.tolist())
            results.notes.append(f"(Not searched: {', '.join(names[:10])}{' and more' if len(names) > 10 else ''}.)")
        return results

    def _mirror_lines(self, actor: Actor, repo: str, path: str, commit: str, start: int, end: int) -> list[str]:
        content = self.repos.read_file(actor, repo, path, start, end, revision=commit)
        return list(content.lines)

    # --- index lifecycle -------------------------------------------------------------------------------

    def folder(self, repo: Repo, commit: str) -> Path:
        return self.root / str(repo.id) / commit

    def index_revision(self, repo: Repo, commit: str) -> int:
        """Build the chunk index of `commit` unless it exists; returns the number of chunks (0 if it existed)."""
        folder = self.folder(repo, commit)
        if is_current(folder):
            return 0
        with self._guard:
            if (repo.id, commit) in self._building:
                return 0
            self._building.add((repo.id, commit))
        try:
            symbols = self.runtime.get(CodeNavService).index_revision(repo, commit)
            try:
                # The whole revision's definitions in one query (a query per path cost more than chunking).
                spans = symbols.definition_blocks(_DEFINITION_KINDS)
            finally:
                symbols.close()
            stored = self.runtime.get(SearchService).revision_files(repo, commit)
            mirror = pygit2.Repository(str(repo.mirror_path))
            count = build(folder, _source_files(mirror, commit, stored, spans))
            log.info("nls indexed", extra={"repo": repo.name, "commit": commit, "chunks": count})
            return count
        finally:
            with self._guard:
                self._building.discard((repo.id, commit))

    def embed_revision(self, repo: Repo, commit: str) -> int:
        """With `search.nls.dense` on, the dense vectors of `commit`'s chunk index (nls/dense.py) unless they
        exist; returns the number of chunks embedded. A missing model package is logged, not raised: BM25 stays; a
        storage fault (full or read-only disk) is raised, so that the job runs again later."""
        if not self.runtime.config.search_nls_dense:
            return 0
        try:
            return self.dense.embed(self.folder(repo, commit), Path(repo.mirror_path))
        except StorageUnavailable:
            raise  # a full or read-only disk: the job is retried later (nothing was left behind)
        except Unavailable as exc:
            log.error("nls dense vectors not built: %s", exc, extra={"repo": repo.name, "commit": commit})
            return 0

    def on_indexed(self, repo: Repo, branches: dict[str, str]) -> None:
        """Search index listener: index every indexed branch commit, then drop the other revisions' indexes."""
        keep = set(branches.values())
        for commit in sorted(keep):
            self.index_revision(repo, commit)
            self.embed_revision(repo, commit)
        for path in (self.root / str(repo.id)).glob("*"):
            if path.name not in keep:
                shutil.rmtree(path, ignore_errors=True)
        self._forget(repo, keep)

    def drop(self, repo: Repo) -> None:
        """Forget every nls index of `repo` (removal listener)."""
        shutil.rmtree(self.root / str(repo.id), ignore_errors=True)
        self._forget(repo, set())

    def _forget(self, repo: Repo, keep: set[str]) -> None:
        """Evict cached indexes of `repo` whose folders were removed (the mapped files would outlive them)."""
        folder = self.root / str(repo.id)
        with self._guard:
            for path in [p for p in self._cache if p.parent == folder and p.name not in keep]:
                del self._cache[path]
                self._shard_files.pop(path, None)

    def _load(self, folder: Path) -> NlsIndex | None:
        with self._guard:
            if folder in self._cache:
                self._cache.move_to_end(folder)
                return self._cache[folder]
        index = load(folder)
        if index is None:
            return None
        with self._guard:
            self._cache[folder] = index
            while len(self._cache) > _CACHE:
                evicted, _ = self._cache.popitem(last=False)
                self._shard_files.pop(evicted, None)
        return index

    def _files_of(self, repo: Repo, commit: str, index: NlsIndex) -> _ShardFiles:
        """Where the files of `index` (format 5, of `repo` at `commit`) are in search's shard now."""
        folder = self.folder(repo, commit)
        search = self.runtime.get(SearchService)
        shard = search.shard(repo)
        with self._guard:
            found = self._shard_files.get(folder)
        if found is not None and found.shard is shard:
            return found
        # A new shard generation (or the first question): map the files once; two threads may both do it.
        found = _ShardFiles(shard, index, search.revision_files(repo, commit) if shard is not None else None)
        with self._guard:
            if folder in self._cache:
                self._shard_files[folder] = found
        return found

    # --- search ----------------------------------------------------------------------------------------

    def _targets(self, actor: Actor, q: _Question) -> list[Repo]:
        if q.repo is None:
            if q.rev is not None:
                raise InvalidInput("rev: needs repo:", hint="e.g. repo:myrepo rev:v1.2 how are tokens refreshed")
            return self.repos.readable(actor)
        # The usual case, an exact name, is one lookup rather than a record of every readable repository.
        try:
            return [self.repos.get(actor, q.repo)]
        except NotFound:
            pass
        readable = self.repos.readable(actor)
        try:
            pattern = re.compile(q.repo)
        except re.error:
            pattern = re.compile(re.escape(q.repo))
        found = [r for r in readable if pattern.search(r.name)]
        if not found:
            raise NotFound(
                f"no repository matches repo:{q.repo}", hint="list_repos shows the repositories you can read"
            )
        return found

    def search(self, actor: Actor, question: str, *, held: frozenset[int] | None = None) -> NlsResults:
        """Ranked chunks for `question` over the readable repositories (`held`: on a searcher replica, the
        repositories it answers for; by default those its shards hold now)."""
        search = self.runtime.get(SearchService)
        if search.fans_out:
            return self._search_replicas(actor, question, search)
        q = parse_question(question)
        targets = self._targets(actor, q)
        named: list[str] = []
        if q.repo is None:
            # Repository names in the question are a soft filter, not search terms: their files rank first, the
            # others follow. The name stays a term when it is all the question says.
            named, rest = named_repos(q.text, targets)
            words, tokens, _cut = _words_and_tokens(rest) if named else ([], [], False)
            if tokens:
                q = replace(q, words=words, identifiers=[w for w in words if _is_identifier(w)], tokens=tokens)
        results = NlsResults(terms=q.tokens, limit=q.count, count_given=q.count_given, named=named)
        if q.cut:
            results.notes.append(f"(The question was cut to its first {len(q.words)} words: {' '.join(q.words)}.)")
        if named:
            which = ", ".join(named)
            results.notes.append(f"(Files of {which} first, as the question names it; other repositories follow.)")
        hits: list[NlsHit] = []
        if search.replica:
            # A searcher replica searches the repositories it holds; the named ones were found among all.
            mine = search.held()[0] if held is None else held
            targets = [repo for repo in targets if repo.id in mine]
        for repo in targets:
            try:
                resolved = self.repos.resolve(actor, repo.name, q.rev)
            except Unavailable:
                if q.repo is not None:
                    raise
                # Readable but not cloned yet: nothing to search in it; say so rather than fail the whole search.
                results.notes.append(f"(Skipped {repo.name}: not cloned yet, not searchable.)")
                continue
            index = self._load(self.folder(repo, resolved.commit))
            if index is None:
                building = (repo.id, resolved.commit) in self._building
                why = "is still being built" if building else "does not exist (revision not indexed)"
                results.notes.append(
                    f"(The natural-language index of {repo.name}@{resolved.revision} {why}: keyword search used.)"
                )
                hits.extend(self._keyword(actor, repo, resolved.revision, q, results.notes))
                continue
            hits.extend(self._rank(repo, resolved.commit, index, q))
        first = frozenset(named)
        hits.sort(key=lambda h: (h.repo not in first, -h.score))
        # The lines of the hits shown are decoded here, in the caller's thread (REST renders on the event loop);
        # any other hit's only if asked for.
        for hit in shown_hits(hits, q.count):
            hit.text.get()
        results.hits = hits
        return results

    def _rank(self, repo: Repo, commit: str, index: NlsIndex, q: _Question) -> list[NlsHit]:
        scores = index.scores(q.tokens)
        if q.file is not None:
            scores = np.where(index.path_mask(q.file), scores, 0.0)
        if self.runtime.config.search_nls_dense:
            scores = self.dense.fuse(self.folder(repo, commit), index, q.text, scores, q.file)
        # Only chunks with a score are candidates; of them the top ones (a partition, then a sort of those only): a
        # full sort of every chunk's score costs more than the rest of the question on a big revision.
        scored = np.flatnonzero(scores > 0)
        values = scores[scored]
        top = min(_CANDIDATES, len(scored))
        if top == 0:
            return []
        if top < len(scored):
            # Of the chunks tied at the last place, the first ones: the answer does not depend on how the
            # selection algorithm breaks ties (nor does the order below: equal scores in chunk order).
            last = np.partition(values, len(values) - top)[len(values) - top]
            above = np.flatnonzero(values > last)
            keep = np.concatenate((above, np.flatnonzero(values == last)[: top - len(above)]))
            scored, values = scored[keep], values[keep]
        picked = np.lexsort((scored, -values))
        order, bases = scored[picked].tolist(), values[picked].tolist()
        blobs = _Blobs(repo.mirror_path)  # opened only if used: for an index of format 2, or a file not in the shard
        read = self._chunk_reader(repo, commit, index, blobs)
        stems = frozenset(terms(" ".join(q.words)))
        phrase = " ".join(w.lower() for w in q.words if not _is_identifier(w))
        needles = [ident.lower().encode() for ident in q.identifiers]
        phrase_needle = phrase.encode() if len(phrase.split()) > 1 else None
        needs_text = bool(needles) or phrase_needle is not None
        rows = index.table[order].tolist()
        out: list[NlsHit] = []
        for i, row, base in zip(order, rows, bases, strict=True):
            file_id, start, end = row[PATH], row[START], row[END]
            count = end - start + 1
            if read is not None:
                raw = read(i, file_id, row[BYTE_START], row[BYTE_END])
                lines = ChunkLines(functools.partial(decode_lines, raw, count))
                text = _searchable(raw) if needs_text else b""
            else:  # an index of format 2: the lines come from the blob (read now if the boosts need the text)
                blob = index.blobs[file_id]
                lines = ChunkLines(functools.partial(blobs.chunk_lines, blob, row[BYTE_START], row[BYTE_END], count))
                text = "\n".join(lines.get()).lower().encode() if needs_text else b""
            boost = 1.0
            if needs_text:
                boost += 0.5 * sum(1 for needle in needles if needle in text)
                if phrase_needle is not None and phrase_needle in text:
                    boost += 0.3
            symbols = index.symbols.get(i, ())
            if symbols:
                symbol_stems = index.symbol_terms(i)
                if symbol_stems:
                    boost += 0.6 * len(stems & symbol_stems) / max(1, len(stems))
            boost += 0.2 * len(stems & index.path_terms(file_id)) / max(1, len(stems))
            out.append(NlsHit(repo.name, index.paths[file_id], commit, start, end, base * boost, lines, symbols))
        return out

    def _chunk_reader(
        self, repo: Repo, commit: str, index: NlsIndex, blobs: _Blobs
    ) -> Callable[[int, int, int, int], bytes] | None:
        """Reads a chunk's bytes from (chunk, file, byte start, byte end): from search's shard for an index of format
        5 (git for a file the shard holds no bytes of), from the texts of formats 3 and 4; None for format 2."""
        if index.format >= 5:
            files = self._files_of(repo, commit, index)
            return lambda _chunk, file_id, start, end: files.raw(file_id, start, end, index.blobs[file_id], blobs)
        return None if index.texts is None else index.texts.raw

    def _keyword(self, actor: Actor, repo: Repo, revision: str, q: _Question, notes: list[str]) -> list[NlsHit]:
        words = " OR ".join(re.escape(w) for w in q.words)
        query = f"repo:^{re.escape(repo.name)}$ rev:{revision} ({words})"
        found = self.runtime.get(SearchService).search(actor, query)
        notes.extend(f"(Skipped {s})" for s in found.skipped)
        out: list[NlsHit] = []
        for rank, f in enumerate(found.files):
            if q.file is not None and not q.file.search(f.path):
                continue
            for m in f.line_matches[:CHUNKS_PER_FILE]:
                hit_lines = ChunkLines.known([m.line])
                out.append(NlsHit(f.repo, f.path, f.commit, m.line_number, m.line_number, -rank, hit_lines))
        return out
