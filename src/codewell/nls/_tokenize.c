/* Native chunking and term counting for the nls index build (module codewell.nls._tokenize; nls/native.py).

   TermCounter.add_source: one file as the build gets it (its bytes: a view of search's shard, or git's), chunked
   by index.py's chunk_file rules on the bytes (the lines as decoding, splitting at \n and dropping a final empty
   line gives them; a window is blank when str.strip() of each decoded line is empty), then each chunk counted
   as add_file counts it. Returns the chunk table rows and the chunks' symbol names; nothing is decoded.
   TermCounter.add_file: the chunks of one file, given as byte ranges, become documents of term counts. Each
   identifier ([A-Za-z_][A-Za-z0-9_]*, exactly the _IDENT regex of index.py) of a chunk's body counts once, of
   its comments (the rest of a line after its first `#`, `//`, slash-star, `*`, triple quotes: the _COMMENT
   regex) `comment_weight` more times, of the file's path `path_weight` times and of the chunk's symbol names
   `symbol_weight` times. An identifier's terms are worked out once, the first time it is seen, as index.py's
   _identifier_tokens does: split at `_` and into words by the _WORD regex (camelCase, acronyms, digit runs),
   lower-cased; the whole identifier lower-cased is a term when it has more than one word; each word of two
   letters or more is a term through `word_token`, the Python callable given to the constructor (stop list
   and Snowball stemming), called once per distinct word. After that an identifier is one hash lookup.
   TermCounter.lengths / frequencies / bm25: the documents' lengths, the terms' document frequencies, then the
   BM25 score matrix straight into bm25s's column-major arrays (the same floating-point operations as bm25s's
   numpy code); vocab_json: the terms as bm25s writes its vocabulary. export / tokens: the raw counts (tests).
   chunk_file: add_source's chunking alone (tests).

   Why native: tokenizing and counting in Python (a regex per chunk, a cached split per identifier, a list
   of strings per chunk, then bm25s's Counter per document) cost ~4x the whole search index build. Here a
   file is one call that creates no Python object per identifier occurrence. On a big tree the counter waits
   on memory (millions of identifiers and terms): its tables are built to touch few cache lines per lookup.

   Identifiers are ASCII, so working on the blob's bytes is the same as working on its decoded text: UTF-8
   never puts an ASCII byte inside a multi-byte sequence, and the decoder's replacement characters are not
   identifier characters either. Every offset is bounds-checked against the buffer. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* The GIL. A call's pure-C stretches (scanning a file's bytes, the lookups and counting, the whole-corpus loops of
   lengths, frequencies, bm25, export, vocab_json, freeing the tables) run without it, so that a thread in a long
   call does not stop the process's other threads (a job worker's main thread handling SIGTERM, its exit): they
   touch no Python object and allocate with PyMem_Raw*, which needs no GIL. `released` is this thread's state while
   its call runs without the GIL; what needs the GIL inside such a stretch (word_token, raising an error,
   decoding a line with non-ASCII whitespace) takes it back first (an error keeps it: the call ends holding it). */
static _Thread_local PyThreadState *released;

static void gil_release(void) { released = PyEval_SaveThread(); }

/* Take the GIL back if this thread's call released it. */
static void gil_hold(void) {
    PyThreadState *state = released;
    if (state == NULL) return;
    released = NULL;
    PyEval_RestoreThread(state);
}

/* add_file and add_source over fewer bytes keep the GIL: ~6 ms of counting, about Python's own switch interval,
   and no wait to take it back (up to that interval when another thread runs Python: a call per small file paid it
   each time, 1.6-1.9x the counting's wall time beside a busy thread). Over more, the GIL that word_token's call
   took back is let go again once RELEASE_BYTES more have been counted, not after each new word (`Pace`). */
#define RELEASE_BYTES ((Py_ssize_t)1 << 20)

typedef struct {
    int on;          /* the call runs without the GIL */
    Py_ssize_t held; /* bytes counted since it was taken back */
} Pace;

/* A call over `bytes` bytes: whether it lets the GIL go, and it does. */
static Pace pace_start(Py_ssize_t bytes) {
    Pace pace = {bytes >= RELEASE_BYTES, 0};
    if (pace.on) gil_release();
    return pace;
}

/* `bytes` more counted (a document): the GIL let go again if it was taken back RELEASE_BYTES ago. */
static void pace_step(Pace *pace, Py_ssize_t bytes) {
    if (!pace->on || released != NULL) return;
    pace->held += bytes;
    if (pace->held >= RELEASE_BYTES) {
        pace->held = 0;
        gil_release();
    }
}

#define NO_MEMORY() (gil_hold(), (void)PyErr_NoMemory())
#define RAISE(exc, msg) (gil_hold(), PyErr_SetString((exc), (msg)))
#define RAISE_FORMAT(exc, ...) (gil_hold(), (void)PyErr_Format((exc), __VA_ARGS__))

/* Byte classes of identifiers, one table lookup per byte in the scanning loops (filled at module init). */
enum { START = 1, PART = 2 };
static uint8_t CLASS[256];
#define IS_START(c) (CLASS[(uint8_t)(c)] & START)
#define IS_PART(c) (CLASS[(uint8_t)(c)] & PART)
#define IS_UPPER(c) ((c) >= 'A' && (c) <= 'Z')
#define IS_LOWER(c) ((c) >= 'a' && (c) <= 'z')
#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')

/* Ask for transparent huge pages on a big table (Linux, THP in "madvise" mode): its lookups land anywhere in it,
   and with 4 KiB pages nearly each one also missed the TLB; 2 MiB pages cut the page walks. A hint only. */
static void advise_huge(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (n < 4 * huge) return;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + n) & ~(huge - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t n = *cap ? *cap : 256;
    while (n < need) n *= 2;
    void *p = PyMem_RawRealloc(*buf, (size_t)n * item);
    if (p == NULL) {
        NO_MEMORY();
        return -1;
    }
    *buf = p;
    *cap = n;
    advise_huge(p, (size_t)n * item);
    return 0;
}

#define HASH_SEED 2166136261u /* FNV-1a */
#define HASH_STEP(h, c) (((h) ^ (c)) * 16777619u)

static uint32_t hash_bytes(const uint8_t *s, Py_ssize_t n) {
    uint32_t h = HASH_SEED;
    for (Py_ssize_t i = 0; i < n; i++) h = HASH_STEP(h, s[i]);
    return h;
}

/* A set of byte strings, each numbered in insertion order (open addressing, keys end to end in an arena).
   A slot keeps the hash, so a lookup compares keys only on a hash match. Per entry only where its key ends in the
   arena (4 bytes; it starts where the previous one ends) and, for the words, its value: the term table holds 4M
   entries on the Linux tree, and a 24-byte entry (hash, length, offset, value) was ~60 MB of the build's peak. */
typedef struct {
    uint32_t hash;
    int32_t entry; /* -1: free */
} Slot;

typedef struct {
    Slot *slots;
    Py_ssize_t size; /* power of two, at least twice the entries */
    char *arena;
    Py_ssize_t arena_len, arena_cap;
    uint32_t *ends;  /* entry e's key: arena[e ? ends[e - 1] : 0 : ends[e]] */
    int32_t *values; /* per entry, when the table has values (the words: the term id or -1); else NULL */
    Py_ssize_t n, cap, values_cap;
    int has_values;
} Table;

static inline Py_ssize_t key_start(const Table *t, Py_ssize_t e) { return e ? (Py_ssize_t)t->ends[e - 1] : 0; }

static int table_resize(Table *t, Py_ssize_t size) {
    Slot *slots = PyMem_RawMalloc((size_t)size * sizeof(Slot));
    if (slots == NULL) {
        NO_MEMORY();
        return -1;
    }
    advise_huge(slots, (size_t)size * sizeof(Slot));
    for (Py_ssize_t i = 0; i < size; i++) slots[i].entry = -1;
    for (Py_ssize_t i = 0; i < t->size; i++) { /* the old slots hold every entry with its hash */
        if (t->slots[i].entry < 0) continue;
        uint32_t h = t->slots[i].hash;
        Py_ssize_t at = h & (size - 1);
        while (slots[at].entry >= 0) at = (at + 1) & (size - 1);
        slots[at] = t->slots[i];
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->size = size;
    return 0;
}

static void table_free(Table *t) {
    void *bufs[] = {t->slots, t->arena, t->ends, t->values};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) PyMem_RawFree(bufs[i]);
    memset(t, 0, sizeof *t);
}

/* The entry of s[0:n], or -1 with `*slot` where it would go. */
static Py_ssize_t table_find(const Table *t, const uint8_t *s, Py_ssize_t n, uint32_t h, Py_ssize_t *slot) {
    Py_ssize_t mask = t->size - 1, at = h & mask;
    for (int32_t e; (e = t->slots[at].entry) >= 0; at = (at + 1) & mask) {
        if (t->slots[at].hash != h) continue;
        Py_ssize_t from = key_start(t, e);
        if ((Py_ssize_t)t->ends[e] - from == n && memcmp(t->arena + from, s, (size_t)n) == 0) return e;
    }
    *slot = at;
    return -1;
}

/* Add s[0:n] (not present; `slot` from table_find) with `value` (kept when the table has values); its entry
   number, or -1 on error. */
static Py_ssize_t table_add(Table *t, const uint8_t *s, Py_ssize_t n, uint32_t h, Py_ssize_t slot, int32_t value) {
    if (n > INT32_MAX || t->n >= INT32_MAX / 2 || t->arena_len + n > (Py_ssize_t)UINT32_MAX) {
        RAISE(PyExc_ValueError, "too many or too long identifiers");
        return -1;
    }
    Py_ssize_t e = t->n;
    if (grow((void **)&t->arena, &t->arena_cap, t->arena_len + n, 1) < 0 ||
        grow((void **)&t->ends, &t->cap, e + 1, sizeof(uint32_t)) < 0 ||
        (t->has_values && grow((void **)&t->values, &t->values_cap, e + 1, sizeof(int32_t)) < 0))
        return -1;
    memcpy(t->arena + t->arena_len, s, (size_t)n);
    t->arena_len += n;
    t->ends[e] = (uint32_t)t->arena_len;
    if (t->has_values) t->values[e] = value;
    t->slots[slot].hash = h;
    t->slots[slot].entry = (int32_t)e;
    t->n++;
    if (2 * t->n > t->size && table_resize(t, 2 * t->size) < 0) return -1;
    return e;
}

/* The identifiers seen so far and their terms: the table every identifier occurrence is looked up in, so its
   slot holds all a lookup needs: the hash, the length, the terms' place in `exp`, and the identifier itself
   when it has at most 16 bytes (94 % of the occurrences in the Linux tree), else its place in the arena. A hit
   on a short identifier reads one cache line (a slot is 32 bytes); the table of a big corpus does not fit in
   the cache, and this lookup was the counter's hot spot. */
#define INLINE_KEY 16
typedef struct {
    int32_t at, len; /* the identifier's terms: exp[at : at + len] */
} Terms;

typedef struct {
    uint32_t hash;
    uint32_t len; /* 0: a free slot (identifiers are never empty) */
    Terms terms;
    union {
        uint8_t key[INLINE_KEY]; /* zero-padded */
        Py_ssize_t key_at;       /* len > INLINE_KEY: in the arena */
    } k;
} IdSlot;

typedef struct {
    IdSlot *slots;
    Py_ssize_t size, n; /* size: a power of two, at least twice n */
    char *arena;
    Py_ssize_t arena_len, arena_cap;
} IdTable;

static int ids_resize(IdTable *t, Py_ssize_t size) {
    IdSlot *slots = PyMem_RawCalloc((size_t)size, sizeof(IdSlot));
    if (slots == NULL) {
        NO_MEMORY();
        return -1;
    }
    advise_huge(slots, (size_t)size * sizeof(IdSlot));
    for (Py_ssize_t i = 0; i < t->size; i++) {
        const IdSlot *old = &t->slots[i];
        if (old->len == 0) continue;
        Py_ssize_t at = old->hash & (size - 1);
        while (slots[at].len) at = (at + 1) & (size - 1);
        slots[at] = *old;
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->size = size;
    return 0;
}

static void ids_free(IdTable *t) {
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->arena);
    memset(t, 0, sizeof *t);
}

/* The slot of identifier s[0:n] (n > 0, h its hash): the one holding it, or the free one where it would go. */
static IdSlot *ids_find(const IdTable *t, const uint8_t *s, Py_ssize_t n, uint32_t h) {
    Py_ssize_t mask = t->size - 1, at = h & mask;
    if (n <= INLINE_KEY) {
        uint8_t key[INLINE_KEY] = {0};
        memcpy(key, s, (size_t)n);
        for (;; at = (at + 1) & mask) {
            IdSlot *slot = &t->slots[at];
            if (slot->len == 0 || (slot->hash == h && slot->len == n && memcmp(slot->k.key, key, INLINE_KEY) == 0))
                return slot;
        }
    }
    for (;; at = (at + 1) & mask) {
        IdSlot *slot = &t->slots[at];
        if (slot->len == 0 ||
            (slot->hash == h && slot->len == n && memcmp(t->arena + slot->k.key_at, s, (size_t)n) == 0))
            return slot;
    }
}

/* Fill the free `slot` (from ids_find) with s[0:n] and its terms; grows the table, so `slot` is stale after. */
static int ids_add(IdTable *t, IdSlot *slot, const uint8_t *s, Py_ssize_t n, uint32_t h, Terms terms) {
    if (n > INT32_MAX) {
        RAISE(PyExc_ValueError, "identifier too long");
        return -1;
    }
    slot->hash = h;
    slot->len = (uint32_t)n;
    slot->terms = terms;
    if (n <= INLINE_KEY) {
        memset(slot->k.key, 0, INLINE_KEY);
        memcpy(slot->k.key, s, (size_t)n);
    } else {
        if (grow((void **)&t->arena, &t->arena_cap, t->arena_len + n, 1) < 0) {
            slot->len = 0;
            return -1;
        }
        memcpy(t->arena + t->arena_len, s, (size_t)n);
        slot->k.key_at = t->arena_len;
        t->arena_len += n;
    }
    t->n++;
    return 2 * t->n > t->size ? ids_resize(t, 2 * t->size) : 0;
}

/* The terms the current document counted so far, each with where its count is: a small hash table that stays
   in the cache (a document has ~50 distinct terms), where an array over all terms (millions) missed the cache at
   almost every term. A slot is in use when it carries the current document's generation (no clearing). */
typedef struct {
    int32_t term;
    int32_t at; /* where its count is in the pairs, from the document's first pair */
    uint32_t gen;
} DocSlot;

typedef struct {
    PyObject_HEAD
    PyObject *word_token; /* lower-cased word (str) -> its token (str), or None for a stop word */
    Table tokens;         /* token -> term id (= entry number) */
    Table words;          /* lower-cased word -> term id, or -1 for none */
    IdTable idents;       /* identifier -> its terms */
    IdSlot *hot;          /* HOT recently looked-up short identifiers (direct-mapped), in front of `idents` */
    int32_t *exp;
    Py_ssize_t exp_n, exp_cap;
    DocSlot *doc_terms;
    Py_ssize_t doc_size, doc_n; /* doc_size: a power of two, 1 << doc_bits */
    int doc_bits;
    uint32_t gen; /* the current document's */
    /* output */
    /* A pair's count in 8 bits (a quarter of the memory of 32: the pairs are most of the build's peak; 16 bits
       were ~60 MB more on the Linux tree, where a count of 255 or more is rare); a count of WIDE_COUNT or more is
       WIDE_COUNT there and its value in `wide` ((pair, count) in pair order). The current
       document's counts are kept in 32 bits in `doc_count` (from its first pair) until end_doc. */
    int32_t *pair_term;
    uint8_t *pair_count;
    Py_ssize_t pairs, pairs_cap, doc_first; /* doc_first: the current document's first pair */
    int32_t *doc_count;
    Py_ssize_t doc_count_cap;
    int64_t *wide;
    Py_ssize_t wide_n, wide_cap; /* pairs in `wide` (2 int64 each) */
    int64_t *doc_len, *doc_pairs;
    Py_ssize_t docs, docs_cap;
    /* the terms of the current file's path's identifiers */
    Terms *path_terms;
    Py_ssize_t path_n, path_cap;
    uint8_t *scratch; /* an identifier lower-cased */
    Py_ssize_t scratch_cap;
    uint8_t *name_buf; /* a symbol name's code points as bytes (any above 127 as 0x80) */
    Py_ssize_t name_cap;
    Py_ssize_t *line_at; /* the current file's line starts */
    Py_ssize_t line_cap;
    int busy; /* a call runs (enter): word_token calling back into the counter would invalidate its table slots,
                 and another thread, while the call runs without the GIL, would find its tables half-changed */
    int sealed; /* seal() freed what counting needs: nothing can be added any more */
    int closed; /* finish_counting() (or seal()) freed the identifier and word tables: nothing can be added */
    Py_ssize_t sealed_terms; /* the number of terms when sealed (their table is freed) */
} TermCounter;

/* The term id of token s[0:n], numbered when new. */
static Py_ssize_t token_id(TermCounter *self, const uint8_t *s, Py_ssize_t n) {
    uint32_t h = hash_bytes(s, n);
    Py_ssize_t slot, e = table_find(&self->tokens, s, n, h, &slot);
    if (e >= 0) return e;
    if (n > INT32_MAX || self->tokens.n >= INT32_MAX / 2) {
        RAISE(PyExc_ValueError, "too many terms");
        return -1;
    }
    return table_add(&self->tokens, s, n, h, slot, 0);
}

/* The term id of lower-cased word s[0:n] (-1: none, a stop word), from word_token on first sight; -2 on error. */
static Py_ssize_t word_term(TermCounter *self, const uint8_t *s, Py_ssize_t n) {
    uint32_t h = hash_bytes(s, n);
    Py_ssize_t slot, e = table_find(&self->words, s, n, h, &slot);
    if (e >= 0) return self->words.values[e];
    gil_hold(); /* a new word: word_token is Python (the call lets the GIL go again later: pace_step) */
    PyObject *word = PyUnicode_DecodeASCII((const char *)s, n, NULL);
    if (word == NULL) return -2;
    PyObject *token = PyObject_CallOneArg(self->word_token, word);
    Py_DECREF(word);
    if (token == NULL) return -2;
    Py_ssize_t term = -1;
    if (token != Py_None) {
        Py_ssize_t len;
        const char *utf8 = PyUnicode_Check(token) ? PyUnicode_AsUTF8AndSize(token, &len) : NULL;
        if (utf8 == NULL) {
            if (!PyErr_Occurred()) RAISE(PyExc_TypeError, "word_token must return str or None");
            Py_DECREF(token);
            return -2;
        }
        term = token_id(self, (const uint8_t *)utf8, len);
        if (term < 0) {
            Py_DECREF(token);
            return -2;
        }
    }
    Py_DECREF(token);
    /* word_token cannot call back into this counter (`busy`), so `slot` is still free */
    if (table_add(&self->words, s, n, h, slot, (int32_t)term) < 0) return -2;
    return term;
}

/* Length of the next word of part p[0:n] (n > 0; letters and digits), as index.py's _WORD regex finds it. */
static Py_ssize_t next_word(const uint8_t *p, Py_ssize_t n) {
    if (IS_DIGIT(p[0])) {
        Py_ssize_t k = 1;
        while (k < n && IS_DIGIT(p[k])) k++;
        return k;
    }
    if (IS_LOWER(p[0]) || (n > 1 && IS_LOWER(p[1]))) { /* [A-Z]?[a-z]+ */
        Py_ssize_t k = 1;
        while (k < n && IS_LOWER(p[k])) k++;
        return k;
    }
    Py_ssize_t run = 1; /* an upper-case run: all of it, or all but the last when a lower-case letter follows */
    while (run < n && IS_UPPER(p[run])) run++;
    return run >= 2 && run < n && IS_LOWER(p[run]) ? run - 1 : run;
}

/* The terms of identifier s[0:n]: the whole identifier lower-cased when it has more than one word, then each
   word's token (index.py's _identifier_tokens). Appended to exp; returns how many, or -1 on error. */
static Py_ssize_t expand_identifier(TermCounter *self, const uint8_t *s, Py_ssize_t n) {
    if (grow((void **)&self->scratch, &self->scratch_cap, n, 1) < 0) return -1;
    uint8_t *lower = self->scratch;
    for (Py_ssize_t i = 0; i < n; i++) lower[i] = IS_UPPER(s[i]) ? (uint8_t)(s[i] + 32) : s[i];
    /* first pass: count the words, to know whether the whole identifier is a term */
    Py_ssize_t words = 0;
    for (Py_ssize_t i = 0; i < n;) {
        if (s[i] == '_') {
            i++;
            continue;
        }
        Py_ssize_t end = i;
        while (end < n && s[end] != '_') end++;
        for (; i < end; words++) i += next_word(s + i, end - i);
    }
    Py_ssize_t before = self->exp_n;
    if (grow((void **)&self->exp, &self->exp_cap, self->exp_n + words + 1, sizeof(int32_t)) < 0) return -1;
    if (words > 1) {
        Py_ssize_t term = token_id(self, lower, n);
        if (term < 0) return -1;
        self->exp[self->exp_n++] = (int32_t)term;
    }
    for (Py_ssize_t i = 0; i < n;) {
        if (s[i] == '_') {
            i++;
            continue;
        }
        Py_ssize_t end = i;
        while (end < n && s[end] != '_') end++;
        while (i < end) {
            Py_ssize_t k = next_word(s + i, end - i);
            if (k > 1) { /* one-letter words are never terms */
                Py_ssize_t term = word_term(self, lower + i, k);
                if (term == -2) return -1;
                if (term >= 0) self->exp[self->exp_n++] = (int32_t)term;
            }
            i += k;
        }
    }
    return self->exp_n - before;
}



/* The terms of identifier s[0:n] (h: its hash_bytes), expanded and added on first sight; len -1 on error. */
static Terms ident_terms(TermCounter *self, const uint8_t *s, Py_ssize_t n, uint32_t h) {
    IdSlot *slot = ids_find(&self->idents, s, n, h);
    if (slot->len) return slot->terms;
    Terms terms = {(int32_t)self->exp_n, -1};
    Py_ssize_t count = expand_identifier(self, s, n);
    if (count < 0) return terms;
    if (self->exp_n > INT32_MAX) {
        RAISE(PyExc_ValueError, "too many identifiers");
        return terms;
    }
    /* expanding adds no identifier, so `slot` is still free */
    terms.len = (int32_t)count;
    if (ids_add(&self->idents, slot, s, n, h, terms) < 0) terms.len = -1;
    return terms;
}

static inline Py_ssize_t doc_slot(const TermCounter *self, int32_t term) {
    return (Py_ssize_t)(((uint32_t)term * 2654435761u) >> (32 - self->doc_bits)); /* Fibonacci hashing */
}

/* The document's term table at `bits` (its terms so far rehashed), or -1. */
static int doc_resize(TermCounter *self, int bits) {
    DocSlot *slots = PyMem_RawCalloc((size_t)1 << bits, sizeof(DocSlot));
    if (slots == NULL) {
        NO_MEMORY();
        return -1;
    }
    PyMem_RawFree(self->doc_terms);
    self->doc_terms = slots;
    self->doc_bits = bits;
    self->doc_size = (Py_ssize_t)1 << bits;
    self->gen = 1;
    for (Py_ssize_t p = self->doc_first; p < self->pairs; p++) {
        int32_t term = self->pair_term[p];
        Py_ssize_t at = doc_slot(self, term);
        while (slots[at].gen == self->gen) at = (at + 1) & (self->doc_size - 1);
        slots[at] = (DocSlot){term, (int32_t)(p - self->doc_first), self->gen};
    }
    return 0;
}

#define WIDE_COUNT 0xFF

/* Count `terms` `weight` times into document self->docs. */
static int count_terms(TermCounter *self, Terms terms, int32_t weight) {
    int32_t doc = (int32_t)self->docs;
    const int32_t *ids = self->exp + terms.at;
    int32_t n = terms.len;
    if (self->pairs + n > self->pairs_cap) {
        Py_ssize_t cap = self->pairs_cap, cap2 = self->pairs_cap; /* both arrays grow alike */
        if (grow((void **)&self->pair_term, &cap, self->pairs + n, sizeof(int32_t)) < 0 ||
            grow((void **)&self->pair_count, &cap2, self->pairs + n, sizeof(uint8_t)) < 0)
            return -1;
        self->pairs_cap = cap < cap2 ? cap : cap2;
    }
    if (grow((void **)&self->doc_count, &self->doc_count_cap, self->pairs - self->doc_first + n, sizeof(int32_t)) < 0)
        return -1;
    Py_ssize_t mask = self->doc_size - 1;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = ids[i];
        DocSlot *slot = &self->doc_terms[doc_slot(self, t)];
        while (slot->gen == self->gen && slot->term != t)
            slot = &self->doc_terms[(slot - self->doc_terms + 1) & mask];
        if (slot->gen == self->gen) {
            self->doc_count[slot->at] += weight;
            continue;
        }
        *slot = (DocSlot){t, (int32_t)(self->pairs - self->doc_first), self->gen};
        self->pair_term[self->pairs] = t;
        self->doc_count[self->pairs - self->doc_first] = weight;
        self->pairs++;
        if (2 * ++self->doc_n > self->doc_size) {
            if (doc_resize(self, self->doc_bits + 1) < 0) return -1;
            mask = self->doc_size - 1;
        }
    }
    self->doc_len[doc] += (int64_t)weight * n;
    return 0;
}

/* The identifier starting at s[i] (i < end, IS_START(s[i])): counted `weight` times; returns where it ends, or -1. */
static Py_ssize_t count_identifier(TermCounter *self, const uint8_t *s, Py_ssize_t i, Py_ssize_t end, int32_t weight) {
    uint32_t h = HASH_STEP(HASH_SEED, s[i]); /* hashed while scanned: one pass over its bytes */
    Py_ssize_t j = i + 1;
    for (; j < end && IS_PART(s[j]); j++) h = HASH_STEP(h, s[j]);
    Terms terms = ident_terms(self, s + i, j - i, h);
    if (terms.len < 0 || count_terms(self, terms, weight) < 0) return -1;
    return j;
}

/* Every identifier of s[start:end], counted `weight` times. */
static int scan(TermCounter *self, const uint8_t *s, Py_ssize_t start, Py_ssize_t end, int32_t weight) {
    for (Py_ssize_t i = start; i < end;) {
        if (!IS_START(s[i])) {
            i++;
            continue;
        }
        if ((i = count_identifier(self, s, i, end, weight)) < 0) return -1;
    }
    return 0;
}

/* The scan runs ahead of the lookups, in two stages, so that the cache misses of several identifiers overlap
   instead of coming one after the other (the identifier table and the terms of a big corpus are far bigger than
   the cache, and waiting for them was most of the counter's time): an identifier found is queued and its table
   slot prefetched; PENDING identifiers later its slot is read (expanded when new) and the start of its terms
   prefetched; PENDING more later its terms are counted. Both queues are first in, first out: identifiers are
   expanded and counted in scan order, so terms are numbered and counted exactly as without them. */
#define PENDING 8
/* Most occurrences are of identifiers seen a moment ago: a small direct-mapped copy of their slots (128 KiB, in
   the cache) answers them at once, without queueing or touching the big table. They are counted before the
   queued identifiers before them, which changes no count: a document's pairs are the same in any order. */
#define HOT 4096
#define HOT_AT(h) (((h) >> 16) & (HOT - 1))
typedef struct {
    const uint8_t *s;
    Py_ssize_t n;
    uint32_t hash;
    int32_t weight;
} Found;

typedef struct {
    Terms terms;
    int32_t weight;
} Looked;

typedef struct {
    Found found[PENDING];
    Looked looked[PENDING];
    unsigned found_n, found_at, looked_n, looked_at; /* queued, and where the oldest is */
} Queues;

/* Count the oldest looked-up identifier. */
static int count_oldest(TermCounter *self, Queues *q) {
    const Looked *l = &q->looked[q->looked_at++ % PENDING];
    q->looked_n--;
    return count_terms(self, l->terms, l->weight);
}

/* Look the oldest found identifier up, and queue its terms (counting the oldest of those if the queue is full). */
static int look_oldest(TermCounter *self, Queues *q) {
    const Found *f = &q->found[q->found_at++ % PENDING];
    q->found_n--;
    Terms terms = ident_terms(self, f->s, f->n, f->hash);
    if (terms.len < 0) return -1;
    __builtin_prefetch(self->exp + terms.at);
    if (f->n <= INLINE_KEY) {
        IdSlot *hot = &self->hot[HOT_AT(f->hash)];
        hot->hash = f->hash;
        hot->len = (uint32_t)f->n;
        hot->terms = terms;
        memset(hot->k.key, 0, INLINE_KEY);
        memcpy(hot->k.key, f->s, (size_t)f->n);
    }
    if (q->looked_n == PENDING && count_oldest(self, q) < 0) return -1;
    q->looked[(q->looked_at + q->looked_n++) % PENDING] = (Looked){terms, f->weight};
    return 0;
}

/* A chunk's body s[start:end] in one pass: each identifier counted once, and `comment_weight` more times when it
   stands after its line's first comment mark (what index.py's _COMMENT regex captures). Marks are not
   identifier bytes, so a mark never cuts an identifier. */
static int scan_chunk(TermCounter *self, const uint8_t *s, Py_ssize_t start, Py_ssize_t end, int32_t comment_weight) {
    Queues q;
    q.found_n = q.found_at = q.looked_n = q.looked_at = 0;
    int32_t weight = 1; /* 1 + comment_weight once past the line's first mark */
    for (Py_ssize_t i = start; i < end;) {
        uint8_t c = s[i];
        if (IS_START(c)) {
            uint32_t h = HASH_STEP(HASH_SEED, c); /* hashed while scanned: one pass over its bytes */
            Py_ssize_t j = i + 1;
            for (; j < end && IS_PART(s[j]); j++) h = HASH_STEP(h, s[j]);
            const IdSlot *hot = &self->hot[HOT_AT(h)];
            if (hot->hash == h && hot->len == (uint32_t)(j - i) && j - i <= INLINE_KEY) {
                uint8_t key[INLINE_KEY] = {0};
                memcpy(key, s + i, (size_t)(j - i));
                if (memcmp(hot->k.key, key, INLINE_KEY) == 0) {
                    if (count_terms(self, hot->terms, weight) < 0) return -1;
                    i = j;
                    continue;
                }
            }
            __builtin_prefetch(&self->idents.slots[h & (self->idents.size - 1)]);
            if (q.found_n == PENDING && look_oldest(self, &q) < 0) return -1;
            q.found[(q.found_at + q.found_n++) % PENDING] = (Found){s + i, j - i, h, weight};
            i = j;
            continue;
        }
        if (c == '\n') {
            weight = 1;
        } else if (weight == 1 && comment_weight &&
                   (c == '#' || c == '*' || (c == '/' && i + 1 < end && (s[i + 1] == '/' || s[i + 1] == '*')) ||
                    ((c == '"' || c == '\'') && i + 2 < end && s[i + 1] == c && s[i + 2] == c))) {
            weight = 1 + comment_weight;
        }
        i++;
    }
    while (q.found_n)
        if (look_oldest(self, &q) < 0) return -1;
    while (q.looked_n)
        if (count_oldest(self, &q) < 0) return -1;
    return 0;
}

/* Every identifier of a str (a symbol name), counted `weight` times: as scanning its UTF-8 bytes, since only
   ASCII characters are identifier characters. */
static int scan_str(TermCounter *self, PyObject *text, int32_t weight) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND) return scan(self, PyUnicode_1BYTE_DATA(text), 0, n, weight);
    if (grow((void **)&self->name_buf, &self->name_cap, n, 1) < 0) return -1;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        self->name_buf[i] = c < 128 ? (uint8_t)c : 0x80;
    }
    return scan(self, self->name_buf, 0, n, weight);
}

/* The terms of the file path p[0:n]'s identifiers, for every chunk of the file. */
static int set_path(TermCounter *self, const uint8_t *p, Py_ssize_t n) {
    self->path_n = 0;
    for (Py_ssize_t i = 0; i < n;) {
        if (!IS_START(p[i])) {
            i++;
            continue;
        }
        Py_ssize_t j = i + 1;
        while (j < n && IS_PART(p[j])) j++;
        Terms terms = ident_terms(self, p + i, j - i, hash_bytes(p + i, j - i));
        if (terms.len < 0 || grow((void **)&self->path_terms, &self->path_cap, self->path_n + 1, sizeof(Terms)) < 0)
            return -1;
        self->path_terms[self->path_n++] = terms;
        i = j;
    }
    return 0;
}

static int begin_doc(TermCounter *self) {
    if (self->docs >= INT32_MAX) {
        RAISE(PyExc_ValueError, "too many chunks");
        return -1;
    }
    Py_ssize_t cap = self->docs_cap, cap2 = self->docs_cap;
    if (grow((void **)&self->doc_len, &cap, self->docs + 1, sizeof(int64_t)) < 0 ||
        grow((void **)&self->doc_pairs, &cap2, self->docs + 1, sizeof(int64_t)) < 0)
        return -1;
    self->docs_cap = cap < cap2 ? cap : cap2;
    self->doc_len[self->docs] = 0;
    self->doc_first = self->pairs;
    self->doc_n = 0;
    if (self->doc_bits > 10 && doc_resize(self, 10) < 0) return -1; /* after a big document: back to the cache */
    if (++self->gen == 0) { /* wrapped: no slot may carry an old document's generation */
        memset(self->doc_terms, 0, (size_t)self->doc_size * sizeof(DocSlot));
        self->gen = 1;
    }
    return 0;
}

/* The chunk s[start:end] counted as the current document with the path's terms; its symbol names are counted by
   the caller between begin_doc and end_doc. */
static int count_body(TermCounter *self, const uint8_t *s, Py_ssize_t start, Py_ssize_t end, int32_t comment_weight,
                      int32_t path_weight) {
    if (scan_chunk(self, s, start, end, comment_weight) < 0) return -1;
    if (path_weight)
        for (Py_ssize_t i = 0; i < self->path_n; i++)
            if (count_terms(self, self->path_terms[i], path_weight) < 0) return -1;
    return 0;
}

/* The current document's counts into the pairs' 8 bits (and `wide`); -1 with MemoryError. */
static int end_doc(TermCounter *self) {
    if (self->pairs - self->doc_first > INT32_MAX) { /* cannot happen: a chunk is at most 1 MiB */
        Py_FatalError("nls _tokenize: a chunk with over 2**31 distinct terms");
    }
    for (Py_ssize_t k = 0; k < self->pairs - self->doc_first; k++) {
        int32_t count = self->doc_count[k];
        if (count < WIDE_COUNT) {
            self->pair_count[self->doc_first + k] = (uint8_t)count;
            continue;
        }
        if (grow((void **)&self->wide, &self->wide_cap, 2 * (self->wide_n + 1), sizeof(int64_t)) < 0) return -1;
        self->wide[2 * self->wide_n] = self->doc_first + k;
        self->wide[2 * self->wide_n + 1] = count;
        self->wide_n++;
        self->pair_count[self->doc_first + k] = WIDE_COUNT;
    }
    self->doc_pairs[self->docs] = self->pairs - self->doc_first;
    self->docs++;
    return 0;
}

/* Pair p's count; `*w`: a cursor into `wide` for pairs read in order (start at 0). */
static inline int64_t pair_count_at(const TermCounter *self, Py_ssize_t p, Py_ssize_t *w) {
    if (self->pair_count[p] != WIDE_COUNT) return self->pair_count[p];
    while (*w < self->wide_n && self->wide[2 * *w] < p) ++*w;
    return *w < self->wide_n && self->wide[2 * *w] == p ? self->wide[2 * *w + 1] : WIDE_COUNT;
}

/* Forget the documents from `docs` on (a call that failed half-way): their pairs (the next document has a new
   generation, so their term slots are free). */
static void roll_back(TermCounter *self, Py_ssize_t docs, Py_ssize_t pairs) {
    self->pairs = pairs;
    self->docs = docs;
    while (self->wide_n && self->wide[2 * (self->wide_n - 1)] >= pairs) self->wide_n--;
}

/* ---- chunking (index.py's chunk_file on the bytes) ---------------------------------------------------------- */

/* index.py's constants, which the tests compare with these. */
#define WINDOW 40
#define SMALL_FILE_LINES 80
#define MAX_DEFINITION_LINES (3 * WINDOW)
#define MIN_TAIL (WINDOW / 4)
#define WHOLE_FILE (-2) /* a small file's one chunk: every symbol name */
#define NO_SPAN (-1)    /* a window */

/* Line starts of s[0:len] as index.py sees the lines (decoded, split at \n, a final empty line dropped):
   (*at)[k] is where line k (0-based) starts, (*at)[lines] == len. Returns the number of lines, -1 on error. */
static Py_ssize_t line_starts(const uint8_t *s, Py_ssize_t len, Py_ssize_t **at, Py_ssize_t *cap) {
    Py_ssize_t k = 0;
    if (grow((void **)at, cap, 2, sizeof(Py_ssize_t)) < 0) return -1;
    (*at)[0] = 0;
    for (const uint8_t *p = s, *stop = s + len; p < stop;) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(stop - p));
        if (nl == NULL || nl + 1 >= stop) break;
        if (grow((void **)at, cap, k + 3, sizeof(Py_ssize_t)) < 0) return -1;
        (*at)[++k] = nl + 1 - s;
        p = nl + 1;
    }
    Py_ssize_t lines = len ? k + 1 : 0;
    (*at)[lines] = len;
    return lines;
}

/* Is the line s[a:b] (its newline included or not) blank as str.strip() sees its decoded text: 1, 0, -1 on error.
   ASCII bytes decide alone (Python's ASCII whitespace); a line of only whitespace and non-ASCII bytes is decoded
   (invalid UTF-8 replaced, as index.py decodes) and its characters tested (U+00A0, U+3000, ... are whitespace). */
static int line_blank(const uint8_t *s, Py_ssize_t a, Py_ssize_t b) {
    int high = 0;
    for (Py_ssize_t i = a; i < b; i++) {
        uint8_t c = s[i];
        if (c >= 128)
            high = 1;
        else if (!Py_UNICODE_ISSPACE(c))
            return 0;
    }
    if (!high) return 1;
    gil_hold(); /* a Python str (rare: only whitespace and non-ASCII bytes; the call lets the GIL go again later) */
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s + a, b - a, "replace");
    if (text == NULL) return -1;
    int kind = PyUnicode_KIND(text), blank = 1;
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(text); blank && i < n; i++)
        blank = Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i));
    Py_DECREF(text);
    return blank;
}

typedef struct {
    int64_t first, last, start, end, span; /* lines (1-based, inclusive), bytes [start, end), span or WHOLE/NO_SPAN */
} ChunkRow;

typedef struct {
    ChunkRow *rows;
    Py_ssize_t n, cap;
} Chunks;

static int add_chunk(Chunks *out, const Py_ssize_t *at, Py_ssize_t lines, Py_ssize_t first, Py_ssize_t last,
                     Py_ssize_t span) {
    if (last < first - 1) {
        RAISE_FORMAT(PyExc_ValueError, "spans: lines %zd..%zd are not a range of 1-based lines", first, last);
        return -1;
    }
    if (grow((void **)&out->rows, &out->cap, out->n + 1, sizeof(ChunkRow)) < 0) return -1;
    Py_ssize_t a = first - 1 < lines ? first - 1 : lines, b = last < lines ? last : lines;
    out->rows[out->n++] = (ChunkRow){first, last, at[a], at[b], span};
    return 0;
}

/* index.py's _windows: ~WINDOW-line windows over lines first..last, no tail under MIN_TAIL, blank ones skipped. */
static int add_windows(Chunks *out, const uint8_t *s, const Py_ssize_t *at, Py_ssize_t lines, Py_ssize_t first,
                       Py_ssize_t last) {
    for (Py_ssize_t line = first; line <= last;) {
        Py_ssize_t stop = line + WINDOW - 1 < last ? line + WINDOW - 1 : last;
        if (last - stop < MIN_TAIL) stop = last;
        int blank = 1;
        for (Py_ssize_t k = line; blank == 1 && k <= stop; k++) blank = line_blank(s, at[k - 1], at[k]);
        if (blank < 0) return -1;
        if (!blank && add_chunk(out, at, lines, line, stop, NO_SPAN) < 0) return -1;
        line = stop + 1;
    }
    return 0;
}

typedef struct {
    Py_ssize_t start, end;
    PyObject *name; /* borrowed from the spans */
} Span;

/* str a < str b, as Python compares them (code point by code point), reading their data: no GIL needed. */
static int str_less(PyObject *a, PyObject *b) {
    Py_ssize_t na = PyUnicode_GET_LENGTH(a), nb = PyUnicode_GET_LENGTH(b);
    int ka = PyUnicode_KIND(a), kb = PyUnicode_KIND(b);
    const void *da = PyUnicode_DATA(a), *db = PyUnicode_DATA(b);
    for (Py_ssize_t i = 0; i < na && i < nb; i++) {
        Py_UCS4 ca = PyUnicode_READ(ka, da, i), cb = PyUnicode_READ(kb, db, i);
        if (ca != cb) return ca < cb;
    }
    return na < nb;
}

/* Python's order of (start, end, name) tuples (names compared only on equal lines; a merge sort: stable). */
static int span_less(const Span *a, const Span *b) {
    if (a->start != b->start) return a->start < b->start;
    if (a->end != b->end) return a->end < b->end;
    return str_less(a->name, b->name);
}

static void sort_spans(Py_ssize_t *idx, Py_ssize_t *tmp, Py_ssize_t n, const Span *spans) {
    if (n < 2) return;
    Py_ssize_t half = n / 2;
    sort_spans(idx, tmp, half, spans);
    sort_spans(idx + half, tmp, n - half, spans);
    Py_ssize_t i = 0, j = half, k = 0;
    while (i < half && j < n) tmp[k++] = span_less(&spans[idx[j]], &spans[idx[i]]) ? idx[j++] : idx[i++];
    while (i < half) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

/* The spans argument: a sequence of (first line, last line, qualified name) tuples. */
static Py_ssize_t parse_spans(PyObject *seq, Span **spans) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    *spans = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(Span));
    if (*spans == NULL) {
        NO_MEMORY();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Span *span = &(*spans)[i];
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "nnU", &span->start, &span->end, &span->name) ||
            PyUnicode_READY(span->name) < 0) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                RAISE(PyExc_TypeError, "spans must hold (first line, last line, name) tuples");
            }
            PyMem_RawFree(*spans);
            *spans = NULL;
            return -1;
        }
    }
    return n;
}

/* index.py's chunk_file over s[0:len] with its definitions `spans`: the chunks in file order. */
static int chunk_lines(const uint8_t *s, Py_ssize_t len, const Span *spans, Py_ssize_t n_spans, Py_ssize_t **at,
                       Py_ssize_t *at_cap, Chunks *out) {
    out->n = 0;
    Py_ssize_t lines = line_starts(s, len, at, at_cap);
    if (lines <= 0) return (int)lines; /* no lines: no chunk */
    if (lines <= SMALL_FILE_LINES) return add_chunk(out, *at, lines, 1, lines, WHOLE_FILE);
    int rc = -1;
    Py_ssize_t *order = PyMem_RawMalloc((size_t)(2 * n_spans + 1) * sizeof(Py_ssize_t));
    if (order == NULL) {
        NO_MEMORY();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n_spans; i++) order[i] = i;
    sort_spans(order, order + n_spans, n_spans, spans);
    Py_ssize_t covered = 0;
    for (Py_ssize_t k = 0; k < n_spans; k++) {
        const Span *span = &spans[order[k]];
        if (span->start <= covered || span->end > lines) continue;
        if (span->end - span->start + 1 > MAX_DEFINITION_LINES) { /* a long one with members: its members instead */
            int members = 0;
            for (Py_ssize_t m = 0; !members && m < n_spans; m++)
                members = spans[m].start > span->start && spans[m].end <= span->end;
            if (members) continue;
        }
        if (span->start > covered + 1 && add_windows(out, s, *at, lines, covered + 1, span->start - 1) < 0) goto done;
        if (add_chunk(out, *at, lines, span->start, span->end, order[k]) < 0) goto done;
        covered = span->end;
    }
    if (covered < lines && add_windows(out, s, *at, lines, covered + 1, lines) < 0) goto done;
    rc = 0;
done:
    PyMem_RawFree(order);
    return rc;
}

/* A call's hold on the counter: its tables are not for any other call until it ends, which is what a call from
   word_token (the counter half-way through a document) or from another thread while this one runs without the
   GIL would get. Taken and checked with the GIL held. */
static int check_idle(const TermCounter *self, const char *name) {
    if (!self->busy) return 0;
    RAISE_FORMAT(PyExc_RuntimeError,
                 "%s: the counter is busy (called from word_token, or from another thread during one of its calls)",
                 name);
    return -1;
}

static int enter(TermCounter *self, const char *name) {
    if (check_idle(self, name) < 0) return -1;
    self->busy = 1;
    return 0;
}

/* What add_file and add_source check first: weights, the counter's hold (enter), and that it takes documents. On
   success `data` holds the buffer and the counter is busy until the call ends. */
static int begin_adding(TermCounter *self, const char *name, PyObject *data_obj, Py_buffer *data, int comment_weight,
                        int path_weight, int symbol_weight) {
    if (comment_weight < 0 || path_weight < 0 || symbol_weight < 0) {
        RAISE(PyExc_ValueError, "weights must be >= 0");
        return -1;
    }
    if (enter(self, name) < 0) return -1;
    if (self->sealed || self->closed) {
        RAISE_FORMAT(PyExc_RuntimeError, "%s called after finish_counting() or seal(): the counter takes no more "
                     "documents", name);
        self->busy = 0;
        return -1;
    }
    if (PyObject_GetBuffer(data_obj, data, PyBUF_SIMPLE) < 0) {
        self->busy = 0;
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(add_file_doc,
             "add_file(data, bounds, path, symbols, comment_weight, path_weight, symbol_weight, /) -> None\n\n"
             "One document per (start, end) byte range of `data` in `bounds`, with `path` (bytes) and the\n"
             "chunk's symbol names (bytes, one per range) counted in at their weights. After an error no\n"
             "document of the call stays counted.");

typedef struct {
    Py_ssize_t start, end;
    const uint8_t *names; /* the chunk's symbol names: a bytes object's, held by the call's tuple of them */
    Py_ssize_t names_len;
} FileChunk;

static PyObject *add_file(TermCounter *self, PyObject *args) {
    PyObject *data_obj, *bounds, *path, *symbols;
    int comment_weight, path_weight, symbol_weight;
    if (!PyArg_ParseTuple(args, "OOO!Oiii", &data_obj, &bounds, &PyBytes_Type, &path, &symbols, &comment_weight,
                          &path_weight, &symbol_weight))
        return NULL;
    Py_buffer data;
    if (begin_adding(self, "add_file", data_obj, &data, comment_weight, path_weight, symbol_weight) < 0) return NULL;
    PyObject *result = NULL, *bounds_seq = NULL, *symbols_seq = NULL;
    FileChunk *chunks = NULL;
    Py_ssize_t docs = self->docs, pairs = self->pairs;
    bounds_seq = PySequence_Fast(bounds, "bounds must be a sequence of (start, end)");
    if (bounds_seq == NULL) goto done;
    /* a tuple of its own: the names are read without the GIL, while another thread could change a list */
    symbols_seq = PySequence_Tuple(symbols);
    if (symbols_seq == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            RAISE(PyExc_TypeError, "symbols must be a sequence of bytes");
        }
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(bounds_seq);
    if (PyTuple_GET_SIZE(symbols_seq) != n) {
        RAISE(PyExc_ValueError, "one symbols entry per range");
        goto done;
    }
    chunks = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(FileChunk));
    if (chunks == NULL) {
        NO_MEMORY();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) { /* the arguments first, with the GIL */
        FileChunk *c = &chunks[k];
        PyObject *range = PySequence_Fast_GET_ITEM(bounds_seq, k);
        if (!PyTuple_Check(range)) {
            RAISE(PyExc_TypeError, "bounds must hold (start, end) tuples");
            goto done;
        }
        if (!PyArg_ParseTuple(range, "nn", &c->start, &c->end)) goto done;
        if (c->start < 0 || c->start > c->end || c->end > data.len) {
            RAISE_FORMAT(PyExc_ValueError, "bounds: [%zd, %zd) is outside the data (%zd bytes)", c->start, c->end,
                         data.len);
            goto done;
        }
        PyObject *names = PyTuple_GET_ITEM(symbols_seq, k);
        if (!PyBytes_Check(names)) {
            RAISE(PyExc_TypeError, "symbols must be bytes");
            goto done;
        }
        c->names = (const uint8_t *)PyBytes_AS_STRING(names);
        c->names_len = PyBytes_GET_SIZE(names);
    }
    const uint8_t *path_bytes = (const uint8_t *)PyBytes_AS_STRING(path); /* bytes: immutable, the call holds it */
    Py_ssize_t path_len = PyBytes_GET_SIZE(path);
    int failed = 0;
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) total += chunks[k].end - chunks[k].start;
    Pace pace = pace_start(total);
    if (set_path(self, path_bytes, path_len) < 0) failed = 1;
    for (Py_ssize_t k = 0; !failed && k < n; k++) {
        const FileChunk *c = &chunks[k];
        if (begin_doc(self) < 0 || count_body(self, data.buf, c->start, c->end, comment_weight, path_weight) < 0 ||
            (symbol_weight && scan(self, c->names, 0, c->names_len, symbol_weight) < 0) || end_doc(self) < 0)
            failed = 1;
        else
            pace_step(&pace, c->end - c->start);
    }
    gil_hold();
    if (!failed) result = Py_NewRef(Py_None);
done:
    if (result == NULL) roll_back(self, docs, pairs);
    PyMem_RawFree(chunks);
    Py_XDECREF(bounds_seq);
    Py_XDECREF(symbols_seq);
    PyBuffer_Release(&data);
    self->busy = 0;
    return result;
}

PyDoc_STRVAR(add_source_doc,
             "add_source(data, spans, path, file_id, first_row, comment_weight, path_weight, symbol_weight, /)\n"
             "-> (rows: bytes, symbols: list[tuple[int, tuple[str, ...]]])\n\n"
             "Chunk one file and count its chunks: index.py's chunk_file over the lines of `data` (its bytes)\n"
             "with its definitions `spans` ((first line, last line, qualified name) tuples), then one document\n"
             "per chunk as add_file counts it, the chunk's symbol names being its definition's name, or every\n"
             "name for a small file's one chunk. Returns the chunk table rows (int64 file_id, first line, last\n"
             "line, byte start, byte end per chunk) and (first_row + chunk number, names) for each chunk that has\n"
             "names. A file without lines has no chunk and counts nothing (not even its path). After an error\n"
             "nothing of the file stays counted.");

/* add_source's chunking and counting, without the GIL when the caller released it (`pace`); -1 on error. */
static int chunk_and_count(TermCounter *self, const uint8_t *s, Py_ssize_t len, const Span *spans, Py_ssize_t n_spans,
                           const uint8_t *path, Py_ssize_t path_len, int comment_weight, int path_weight,
                           int symbol_weight, Chunks *chunks, Pace *pace) {
    if (chunk_lines(s, len, spans, n_spans, &self->line_at, &self->line_cap, chunks) < 0) return -1;
    if (chunks->n && set_path(self, path, path_len) < 0) return -1;
    for (Py_ssize_t k = 0; k < chunks->n; k++) {
        const ChunkRow *chunk = &chunks->rows[k];
        if (begin_doc(self) < 0 || count_body(self, s, chunk->start, chunk->end, comment_weight, path_weight) < 0)
            return -1;
        if (chunk->span >= 0) {
            if (symbol_weight && scan_str(self, spans[chunk->span].name, symbol_weight) < 0) return -1;
        } else if (chunk->span == WHOLE_FILE) {
            for (Py_ssize_t i = 0; symbol_weight && i < n_spans; i++)
                if (scan_str(self, spans[i].name, symbol_weight) < 0) return -1;
        }
        if (end_doc(self) < 0) return -1;
        pace_step(pace, chunk->end - chunk->start);
    }
    return 0;
}

static PyObject *add_source(TermCounter *self, PyObject *args) {
    PyObject *data_obj, *spans_obj, *path;
    Py_ssize_t file_id, first_row;
    int comment_weight, path_weight, symbol_weight;
    if (!PyArg_ParseTuple(args, "OOO!nniii", &data_obj, &spans_obj, &PyBytes_Type, &path, &file_id, &first_row,
                          &comment_weight, &path_weight, &symbol_weight))
        return NULL;
    Py_buffer data;
    if (begin_adding(self, "add_source", data_obj, &data, comment_weight, path_weight, symbol_weight) < 0) return NULL;
    PyObject *result = NULL, *spans_seq = NULL, *rows = NULL, *named = NULL;
    Span *spans = NULL;
    Chunks chunks = {NULL, 0, 0};
    Py_ssize_t docs = self->docs, pairs = self->pairs, n_spans;
    /* a tuple of its own: the names are read without the GIL, while another thread could change a list */
    spans_seq = PySequence_Tuple(spans_obj);
    if (spans_seq == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        RAISE(PyExc_TypeError, "spans must be a sequence of (first line, last line, name)");
    }
    if (spans_seq == NULL || (n_spans = parse_spans(spans_seq, &spans)) < 0) goto done;
    Pace pace = pace_start(data.len);
    int counted = chunk_and_count(self, data.buf, data.len, spans, n_spans, (const uint8_t *)PyBytes_AS_STRING(path),
                                  PyBytes_GET_SIZE(path), comment_weight, path_weight, symbol_weight, &chunks, &pace);
    gil_hold();
    if (counted < 0) goto done;
    rows = PyBytes_FromStringAndSize(NULL, chunks.n * 5 * (Py_ssize_t)sizeof(int64_t));
    named = PyList_New(0);
    if (rows == NULL || named == NULL) goto done;
    int64_t *row = (int64_t *)PyBytes_AS_STRING(rows);
    for (Py_ssize_t k = 0; k < chunks.n; k++, row += 5) {
        const ChunkRow *chunk = &chunks.rows[k];
        row[0] = file_id, row[1] = chunk->first, row[2] = chunk->last, row[3] = chunk->start, row[4] = chunk->end;
        PyObject *names;
        if (chunk->span >= 0) {
            names = PyTuple_Pack(1, spans[chunk->span].name);
        } else if (chunk->span == WHOLE_FILE && n_spans) {
            names = PyTuple_New(n_spans);
            for (Py_ssize_t i = 0; names != NULL && i < n_spans; i++)
                PyTuple_SET_ITEM(names, i, Py_NewRef(spans[i].name));
        } else {
            continue;
        }
        if (names == NULL) goto done;
        PyObject *entry = Py_BuildValue("(nN)", first_row + k, names);
        if (entry == NULL || PyList_Append(named, entry) < 0) {
            Py_XDECREF(entry);
            goto done;
        }
        Py_DECREF(entry);
    }
    result = PyTuple_Pack(2, rows, named);
done:
    if (result == NULL) roll_back(self, docs, pairs);
    Py_XDECREF(rows);
    Py_XDECREF(named);
    Py_XDECREF(spans_seq);
    PyMem_RawFree(spans);
    PyMem_RawFree(chunks.rows);
    PyBuffer_Release(&data);
    self->busy = 0;
    return result;
}

PyDoc_STRVAR(sizes_doc, "sizes() -> (documents, pairs, identifiers, terms)");

static PyObject *sizes(TermCounter *self, PyObject *Py_UNUSED(ignored)) {
    if (check_idle(self, "sizes") < 0) return NULL; /* numbers that another call is changing */
    return Py_BuildValue("nnnn", self->docs, self->pairs, self->idents.n,
                         self->sealed ? self->sealed_terms : self->tokens.n);
}

static int writable(PyObject *obj, Py_buffer *view, Py_ssize_t items, Py_ssize_t itemsize, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len != items * itemsize) {
        RAISE_FORMAT(PyExc_ValueError, "%s: expected %zd bytes, got %zd", name, items * itemsize, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The documents' pairs are freed: the counter holds no document afterwards (its identifiers and terms stay). */
static void drop_documents(TermCounter *self) {
    PyMem_RawFree(self->pair_term);
    PyMem_RawFree(self->pair_count);
    PyMem_RawFree(self->doc_len);
    PyMem_RawFree(self->doc_pairs);
    PyMem_RawFree(self->wide);
    self->pair_term = NULL;
    self->pair_count = NULL;
    self->doc_len = self->doc_pairs = self->wide = NULL;
    self->wide_n = self->wide_cap = 0;
    self->pairs = self->pairs_cap = self->docs = self->docs_cap = 0;
}

PyDoc_STRVAR(lengths_doc,
             "lengths(doc_len, /) -> None\n\n"
             "Fill the writable int64[documents] buffer with each document's length (terms with repetitions).");

static PyObject *lengths(TermCounter *self, PyObject *args) {
    PyObject *obj;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "O", &obj) || enter(self, "lengths") < 0) return NULL;
    if (writable(obj, &view, self->docs, 8, "doc_len") < 0) {
        self->busy = 0;
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS;
    if (self->docs) memcpy(view.buf, self->doc_len, (size_t)self->docs * 8);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&view);
    self->busy = 0;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(frequencies_doc,
             "frequencies(df, empty_term, /) -> None\n\n"
             "Fill the writable int64 buffer `df` (one per term of the matrix) with each term's document\n"
             "frequency, a document without terms counting as having `empty_term` (-1: none has none).");

static PyObject *frequencies(TermCounter *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t empty_term;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "On", &obj, &empty_term) || enter(self, "frequencies") < 0) return NULL;
    if (PyObject_GetBuffer(obj, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        self->busy = 0;
        return NULL;
    }
    Py_ssize_t n = view.len / 8;
    int64_t *df = view.buf;
    int bad = 0; /* 1: a term past df, 2: a document without terms and no empty_term */
    Py_BEGIN_ALLOW_THREADS;
    memset(df, 0, (size_t)n * 8);
    for (Py_ssize_t p = 0; p < self->pairs; p++) {
        if (self->pair_term[p] >= n) {
            bad = 1;
            break;
        }
        df[self->pair_term[p]]++;
    }
    for (Py_ssize_t d = 0; !bad && d < self->docs; d++) {
        if (self->doc_pairs[d]) continue;
        if (empty_term < 0 || empty_term >= n) {
            bad = 2;
            break;
        }
        df[empty_term]++;
    }
    Py_END_ALLOW_THREADS;
    if (bad == 1) RAISE(PyExc_ValueError, "df: shorter than the terms");
    if (bad == 2) RAISE(PyExc_ValueError, "a document has no terms: empty_term must be a term of df");
    PyBuffer_Release(&view);
    self->busy = 0;
    if (bad) return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(bm25_doc,
             "bm25(empty_term, norm, idf, indptr, indices, data, /) -> None\n\n"
             "The BM25 score matrix of the documents in bm25s's column-major arrays: indptr int64[terms + 1],\n"
             "indices int32[pairs] (documents ascending within a term) and data float32[pairs], each score as\n"
             "bm25s computes it in numpy (method lucene): float32(float64(idf[term]) * tf / (norm[doc] + tf))\n"
             "with tf = float64(float32(count)), the same IEEE operations in the same order, so the same bits.\n"
             "`norm` float64[documents], `idf` float32[terms]; a document without terms has `empty_term` once\n"
             "(pairs then counts it). One pass over the pairs, no per-pair temporaries (numpy's were most of the\n"
             "step). The documents are moved out: the counter holds none afterwards.");

static PyObject *bm25(TermCounter *self, PyObject *args) {
    PyObject *objs[5];
    Py_ssize_t empty_term;
    if (!PyArg_ParseTuple(args, "nOOOOO", &empty_term, &objs[0], &objs[1], &objs[2], &objs[3], &objs[4]) ||
        enter(self, "bm25") < 0)
        return NULL;
    Py_buffer views[5];
    int got = 0;
    PyObject *result = NULL;
    int64_t *next = NULL;
    Py_ssize_t empty = 0;
    for (Py_ssize_t d = 0; d < self->docs; d++) empty += self->doc_pairs[d] == 0;
    if (PyObject_GetBuffer(objs[1], &views[1], PyBUF_C_CONTIGUOUS) < 0) { /* idf: its length is n */
        self->busy = 0;
        return NULL;
    }
    Py_ssize_t n = views[1].len / 4;
    PyBuffer_Release(&views[1]);
    const Py_ssize_t items[5] = {self->docs, n, n + 1, self->pairs + empty, self->pairs + empty};
    const Py_ssize_t size[5] = {8, 4, 8, 4, 4};
    const char *names[5] = {"norm", "idf", "indptr", "indices", "data"};
    for (; got < 5; got++) {
        if (got < 2) {
            if (PyObject_GetBuffer(objs[got], &views[got], PyBUF_C_CONTIGUOUS) < 0) goto done;
            if (views[got].len != items[got] * size[got]) {
                RAISE_FORMAT(PyExc_ValueError, "%s: expected %zd bytes", names[got], items[got] * size[got]);
                PyBuffer_Release(&views[got]);
                goto done;
            }
        } else if (writable(objs[got], &views[got], items[got], size[got], names[got]) < 0) {
            goto done;
        }
    }
    if (empty && (empty_term < 0 || empty_term >= n)) {
        RAISE(PyExc_ValueError, "a document has no terms: empty_term must be a term of idf");
        goto done;
    }
    gil_release(); /* to the end: a pass over every pair (an error takes the GIL back) */
    const double *norm = views[0].buf;
    const float *idf = views[1].buf;
    int64_t *ptr = views[2].buf;
    int32_t *indices = views[3].buf;
    float *data = views[4].buf;
    memset(ptr, 0, (size_t)(n + 1) * 8);
    for (Py_ssize_t p = 0; p < self->pairs; p++) {
        if (self->pair_term[p] >= n) {
            RAISE(PyExc_ValueError, "idf: shorter than the terms");
            goto done;
        }
        ptr[self->pair_term[p] + 1]++;
    }
    if (empty) ptr[empty_term + 1] += empty;
    for (Py_ssize_t j = 0; j < n; j++) ptr[j + 1] += ptr[j];
    next = PyMem_RawMalloc((size_t)(n ? n : 1) * 8);
    if (next == NULL) {
        NO_MEMORY();
        goto done;
    }
    memcpy(next, ptr, (size_t)n * 8);
    Py_ssize_t p = 0, w = 0;
    for (Py_ssize_t d = 0; d < self->docs; d++) {
        Py_ssize_t count = self->doc_pairs[d];
        if (count == 0) { /* the empty term, once */
            double tf = (double)(float)1;
            int64_t at = next[empty_term]++;
            indices[at] = (int32_t)d;
            data[at] = (float)((double)idf[empty_term] * (tf / (norm[d] + tf)));
            continue;
        }
        for (Py_ssize_t end = p + count; p < end; p++) { /* documents in order: ascending within each term */
            int32_t t = self->pair_term[p];
            double tf = (double)(float)pair_count_at(self, p, &w);
            int64_t at = next[t]++;
            indices[at] = (int32_t)d;
            data[at] = (float)((double)idf[t] * (tf / (norm[d] + tf)));
        }
    }
    drop_documents(self);
    PyMem_RawFree(next);
    next = NULL;
    gil_hold();
    result = Py_NewRef(Py_None);
done:
    gil_hold();
    PyMem_RawFree(next);
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    self->busy = 0;
    return result;
}

PyDoc_STRVAR(export_doc,
             "export(doc_len, doc_pairs, terms, counts, /) -> None\n\n"
             "Fill the writable buffers (int64[documents] x2, int32[pairs] x2; see sizes()) with each document's\n"
             "length and number of distinct terms, and the (term, count) pairs in document order. The documents\n"
             "are moved out: the counter holds none afterwards (its identifiers and terms stay).");

static PyObject *export(TermCounter *self, PyObject *args) {
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3]) || enter(self, "export") < 0)
        return NULL;
    const Py_ssize_t items[4] = {self->docs, self->docs, self->pairs, self->pairs};
    const Py_ssize_t size[4] = {8, 8, 4, 4};
    const void *src[4] = {self->doc_len, self->doc_pairs, self->pair_term, NULL}; /* counts: widened below */
    const char *names[4] = {"doc_len", "doc_pairs", "terms", "counts"};
    Py_buffer views[4];
    int got = 0;
    for (; got < 4; got++)
        if (writable(objs[got], &views[got], items[got], size[got], names[got]) < 0) break;
    if (got == 4) {
        Py_BEGIN_ALLOW_THREADS;
        for (int i = 0; i < 3; i++)
            if (items[i]) memcpy(views[i].buf, src[i], (size_t)(items[i] * size[i]));
        int32_t *counts = views[3].buf;
        Py_ssize_t w = 0;
        for (Py_ssize_t p = 0; p < self->pairs; p++) counts[p] = (int32_t)pair_count_at(self, p, &w);
        drop_documents(self); /* moved out: the documents are gone from the counter (its memory is the build's peak) */
        Py_END_ALLOW_THREADS;
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    self->busy = 0;
    if (got < 4) return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(vocab_json_doc,
             "vocab_json(extra, /) -> (bytes, list[int])\n\n"
             "Each of the str `extra` that is not a term yet numbered as one (next id), then the JSON object of\n"
             "every term and its id in id order (UTF-8; what bm25s writes as its vocabulary), and the ids of\n"
             "`extra`. Written here because a Python dict of a few million terms cost more than the BM25 matrix.");

/* The decimal digits of v >= 0 into out (at least 20 bytes); how many. */
static int decimal(Py_ssize_t v, char *out) {
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

static int check_unsealed(const TermCounter *self, const char *name) {
    if (!self->sealed) return 0;
    RAISE_FORMAT(PyExc_RuntimeError, "%s called after seal(): the terms are freed", name);
    return -1;
}

/* The size of the vocabulary's JSON (without the GIL). */
static Py_ssize_t vocab_size(const Table *t) {
    Py_ssize_t size = 2; /* {} */
    char digits[24];
    for (Py_ssize_t e = 0; e < t->n; e++) {
        const uint8_t *key = (const uint8_t *)t->arena + key_start(t, e);
        Py_ssize_t len = (Py_ssize_t)t->ends[e] - key_start(t, e);
        size += 2 + decimal(e, digits) + 1 + (e > 0); /* "": id and a comma */
        for (Py_ssize_t k = 0; k < len; k++)
            size += key[k] == '"' || key[k] == '\\' ? 2 : key[k] < 0x20 ? 6 : 1;
    }
    return size;
}

/* The vocabulary's JSON written at w (vocab_size bytes; without the GIL); where it ends. */
static char *vocab_fill(const Table *t, char *w) {
    *w++ = '{';
    for (Py_ssize_t e = 0; e < t->n; e++) {
        const uint8_t *key = (const uint8_t *)t->arena + key_start(t, e);
        Py_ssize_t len = (Py_ssize_t)t->ends[e] - key_start(t, e);
        if (e > 0) *w++ = ',';
        *w++ = '"';
        for (Py_ssize_t k = 0; k < len; k++) {
            uint8_t c = key[k];
            if (c == '"' || c == '\\') {
                *w++ = '\\';
                *w++ = (char)c;
            } else if (c < 0x20) {
                w += snprintf(w, 7, "\\u%04x", c);
            } else {
                *w++ = (char)c;
            }
        }
        *w++ = '"';
        *w++ = ':';
        w += decimal(e, w);
    }
    *w++ = '}';
    return w;
}

static PyObject *vocab_json(TermCounter *self, PyObject *args) {
    PyObject *extra;
    if (check_unsealed(self, "vocab_json") < 0) return NULL;
    if (!PyArg_ParseTuple(args, "O", &extra) || enter(self, "vocab_json") < 0) return NULL;
    PyObject *seq = PySequence_Fast(extra, "extra must be a sequence of str"), *ids = NULL, *out = NULL;
    if (seq == NULL) {
        self->busy = 0;
        return NULL;
    }
    Py_ssize_t n_extra = PySequence_Fast_GET_SIZE(seq);
    if ((ids = PyList_New(n_extra)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n_extra; i++) {
        PyObject *token = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t len;
        const char *utf8 = PyUnicode_Check(token) ? PyUnicode_AsUTF8AndSize(token, &len) : NULL;
        if (utf8 == NULL) {
            if (!PyErr_Occurred()) RAISE(PyExc_TypeError, "extra must hold str");
            goto done;
        }
        Py_ssize_t id = token_id(self, (const uint8_t *)utf8, len);
        PyObject *number = id < 0 ? NULL : PyLong_FromSsize_t(id);
        if (number == NULL) goto done;
        PyList_SET_ITEM(ids, i, number);
    }
    const Table *t = &self->tokens;
    Py_ssize_t size;
    Py_BEGIN_ALLOW_THREADS;
    size = vocab_size(t);
    Py_END_ALLOW_THREADS;
    if ((out = PyBytes_FromStringAndSize(NULL, size)) == NULL) goto done;
    char *start = PyBytes_AS_STRING(out), *end; /* a new bytes object only this call knows: no GIL to fill it */
    Py_BEGIN_ALLOW_THREADS;
    end = vocab_fill(t, start);
    Py_END_ALLOW_THREADS;
    if (end != start + size) {
        RAISE(PyExc_SystemError, "vocab_json: size mismatch");
        Py_CLEAR(out);
        goto done;
    }
    Py_SETREF(out, PyTuple_Pack(2, out, ids));
done:
    Py_DECREF(seq);
    Py_XDECREF(ids);
    self->busy = 0;
    return out;
}

PyDoc_STRVAR(tokens_doc, "tokens() -> list[str]: every term, by id");

static PyObject *tokens(TermCounter *self, PyObject *Py_UNUSED(ignored)) {
    if (check_unsealed(self, "tokens") < 0) return NULL;
    if (check_idle(self, "tokens") < 0) return NULL; /* a table that another call may be growing */
    const Table *t = &self->tokens;
    PyObject *list = PyList_New(t->n);
    if (list == NULL) return NULL;
    for (Py_ssize_t e = 0; e < t->n; e++) {
        PyObject *token = PyUnicode_DecodeUTF8(t->arena + key_start(t, e), (Py_ssize_t)t->ends[e] - key_start(t, e),
                                                 "surrogatepass");
        if (token == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, e, token);
    }
    return list;
}

PyDoc_STRVAR(seal_doc,
             "seal() -> None\n\n"
             "Free what only counting and the vocabulary need: the identifier, word and term tables (on the Linux\n"
             "tree most of the counter's memory besides the pairs), so that bm25()'s output arrays do not come on\n"
             "top of them; call it after vocab_json(). The documents and their pairs stay (sizes() still counts the\n"
             "terms); adding a document, tokens() and vocab_json() raise RuntimeError afterwards.");

PyDoc_STRVAR(finish_counting_doc,
             "finish_counting() -> None\n\n"
             "Free what only counting needs, the identifier and word tables (on the Linux tree the biggest part of the\n"
             "counter's memory besides the pairs), so that vocab_json()'s bytes do not come on top of them. The\n"
             "terms stay (vocab_json() and tokens() still answer); adding a document raises RuntimeError afterwards.");

static PyObject *finish_counting(TermCounter *self, PyObject *Py_UNUSED(ignored)) {
    if (enter(self, "finish_counting") < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS; /* freeing tables of GBs: unmapping them takes a while */
    ids_free(&self->idents);
    table_free(&self->words);
    PyMem_RawFree(self->hot);
    PyMem_RawFree(self->exp);
    Py_END_ALLOW_THREADS;
    self->hot = NULL;
    self->exp = NULL;
    self->exp_n = self->exp_cap = 0;
    self->closed = 1;
    self->busy = 0;
    Py_RETURN_NONE;
}

static PyObject *seal(TermCounter *self, PyObject *Py_UNUSED(ignored)) {
    if (enter(self, "seal") < 0) return NULL;
    self->closed = 1;
    self->sealed_terms = self->tokens.n;
    Py_BEGIN_ALLOW_THREADS; /* freeing tables of GBs: unmapping them takes a while */
    ids_free(&self->idents);
    table_free(&self->words);
    table_free(&self->tokens);
    PyMem_RawFree(self->hot);
    PyMem_RawFree(self->exp);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    self->hot = NULL;
    self->exp = NULL;
    self->exp_n = self->exp_cap = 0;
    self->sealed = 1;
    Py_RETURN_NONE;
}

static int TermCounter_init(TermCounter *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"word_token", NULL};
    PyObject *word_token;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", kwlist, &word_token)) return -1;
    if (!PyCallable_Check(word_token)) {
        RAISE(PyExc_TypeError, "word_token must be callable");
        return -1;
    }
    if (self->word_token != NULL) {
        RAISE(PyExc_RuntimeError, "TermCounter is already initialized");
        return -1;
    }
    self->word_token = Py_NewRef(word_token);
    self->words.has_values = 1;
    if (table_resize(&self->tokens, 1 << 12) < 0 || table_resize(&self->words, 1 << 12) < 0 ||
        ids_resize(&self->idents, 1 << 12) < 0 || doc_resize(self, 8) < 0)
        return -1;
    if ((self->hot = PyMem_RawCalloc(HOT, sizeof(IdSlot))) == NULL) {
        NO_MEMORY();
        return -1;
    }
    return 0;
}

static void TermCounter_dealloc(TermCounter *self) {
    Py_XDECREF(self->word_token);
    table_free(&self->tokens);
    table_free(&self->words);
    ids_free(&self->idents);
    PyMem_RawFree(self->hot);
    PyMem_RawFree(self->doc_count);
    PyMem_RawFree(self->wide);
    void *bufs[] = {self->exp,       self->doc_terms, self->pair_term, self->pair_count, self->doc_len,
                    self->doc_pairs, self->path_terms, self->scratch,  self->name_buf,   self->line_at};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) PyMem_RawFree(bufs[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef counter_methods[] = {
    {"add_file", (PyCFunction)add_file, METH_VARARGS, add_file_doc},
    {"add_source", (PyCFunction)add_source, METH_VARARGS, add_source_doc},
    {"sizes", (PyCFunction)sizes, METH_NOARGS, sizes_doc},
    {"export", (PyCFunction)export, METH_VARARGS, export_doc},
    {"tokens", (PyCFunction)tokens, METH_NOARGS, tokens_doc},
    {"vocab_json", (PyCFunction)vocab_json, METH_VARARGS, vocab_json_doc},
    {"lengths", (PyCFunction)lengths, METH_VARARGS, lengths_doc},
    {"frequencies", (PyCFunction)frequencies, METH_VARARGS, frequencies_doc},
    {"bm25", (PyCFunction)bm25, METH_VARARGS, bm25_doc},
    {"finish_counting", (PyCFunction)finish_counting, METH_NOARGS, finish_counting_doc},
    {"seal", (PyCFunction)seal, METH_NOARGS, seal_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TermCounterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "codewell.nls._tokenize.TermCounter",
    .tp_basicsize = sizeof(TermCounter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("TermCounter(word_token): term counts per chunk; see the module's source for what it does."),
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TermCounter_init,
    .tp_dealloc = (destructor)TermCounter_dealloc,
    .tp_methods = counter_methods,
};

PyDoc_STRVAR(chunk_file_doc,
             "chunk_file(data, spans, /) -> list[tuple[int, int, int, int, int]]\n\n"
             "index.py's chunk_file over the lines of `data` (bytes) with its definitions `spans` ((first line,\n"
             "last line, qualified name) tuples): per chunk its first and last line, its byte range, and the\n"
             "index of its definition in `spans`, -1 for a window, -2 for a small file's one chunk. What\n"
             "TermCounter.add_source chunks by; for the tests.");

static PyObject *chunk_file(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *data_obj, *spans_obj;
    if (!PyArg_ParseTuple(args, "OO", &data_obj, &spans_obj)) return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *seq = PySequence_Fast(spans_obj, "spans must be a sequence of (first line, last line, name)");
    PyObject *out = NULL;
    Span *spans = NULL;
    Py_ssize_t *at = NULL, at_cap = 0, n_spans;
    Chunks chunks = {NULL, 0, 0};
    if (seq == NULL || (n_spans = parse_spans(seq, &spans)) < 0 ||
        chunk_lines(data.buf, data.len, spans, n_spans, &at, &at_cap, &chunks) < 0)
        goto done;
    out = PyList_New(chunks.n);
    for (Py_ssize_t k = 0; out != NULL && k < chunks.n; k++) {
        const ChunkRow *c = &chunks.rows[k];
        PyObject *item = Py_BuildValue("LLLLL", c->first, c->last, c->start, c->end, c->span);
        if (item == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, k, item);
    }
done:
    Py_XDECREF(seq);
    PyMem_RawFree(spans);
    PyMem_RawFree(at);
    PyMem_RawFree(chunks.rows);
    PyBuffer_Release(&data);
    return out;
}

static PyMethodDef methods[] = {
    {"chunk_file", chunk_file, METH_VARARGS, chunk_file_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "codewell.nls._tokenize", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__tokenize(void) {
    for (int c = 0; c < 256; c++) {
        int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        CLASS[c] = (uint8_t)((letter ? START | PART : 0) | (c >= '0' && c <= '9' ? PART : 0));
    }
    if (PyType_Ready(&TermCounterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "TermCounter", (PyObject *)&TermCounterType) < 0 ||
        PyModule_AddIntConstant(m, "WINDOW", WINDOW) < 0 ||
        PyModule_AddIntConstant(m, "SMALL_FILE_LINES", SMALL_FILE_LINES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
