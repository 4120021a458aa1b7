/* Native term counting for the nls index build (module codewell.nls._tokenize; used by nls/native.py).

   TermCounter.add_file: the chunks of one file, given as byte ranges of its blob, become documents of term
   counts. Each identifier ([A-Za-z_][A-Za-z0-9_]*, exactly the _IDENT regex of index.py) of a chunk's body
   counts once, of its comments (the rest of a line after its first `#`, `//`, slash-star, `*`, triple
   quotes: the _COMMENT regex) `comment_weight` more times, of the file's path `path_weight` times and of the
   chunk's symbol names `symbol_weight` times. An identifier's terms are worked out once, the first time it is
   seen, as index.py's _identifier_tokens does: split at `_` and into words by the _WORD regex (camelCase,
   acronyms, digit runs), lower-cased; the whole identifier lower-cased is a term when it has more than one
   word; each word of two letters or more is a term through `word_token`, the Python callable given to the
   constructor (stop list and Snowball stemming), called once per distinct word. After that an identifier is
   one hash lookup.
   TermCounter.export: per document its length (terms with repetitions, as bm25s counts them) and its
   distinct terms with their counts, in first-seen order; tokens(): the term strings by id.
   chunk_bytes: the byte ranges of chunks given by their lines.
   csc: the BM25 score matrix from the (document, term, score) triples in document order, scattered into
   bm25s's column-major arrays by a counting sort (stable, so rows ascend within a column as bm25s has them).

   Why native: tokenizing and counting in Python (a regex per chunk, a cached split per identifier, a list
   of strings per chunk, then bm25s's Counter per document) cost ~4x the whole search index build. Here a
   file is one call that creates no Python object per identifier occurrence.

   Identifiers are ASCII, so working on the blob's bytes is the same as working on its decoded text: UTF-8
   never puts an ASCII byte inside a multi-byte sequence, and the decoder's replacement characters are not
   identifier characters either. Every offset is bounds-checked against the buffer. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Byte classes of identifiers, one table lookup per byte in the scanning loops (filled at module init). */
enum { START = 1, PART = 2 };
static uint8_t CLASS[256];
#define IS_START(c) (CLASS[(uint8_t)(c)] & START)
#define IS_PART(c) (CLASS[(uint8_t)(c)] & PART)
#define IS_UPPER(c) ((c) >= 'A' && (c) <= 'Z')
#define IS_LOWER(c) ((c) >= 'a' && (c) <= 'z')
#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')

static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t n = *cap ? *cap : 256;
    while (n < need) n *= 2;
    void *p = PyMem_Realloc(*buf, (size_t)n * item);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = p;
    *cap = n;
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
   An entry's fields sit together and a slot keeps the hash: a lookup touches few cache lines (the tables of
   a big corpus do not fit in the cache, and the lookups are the counter's hot path). */
typedef struct {
    uint32_t hash;
    int32_t len;
    Py_ssize_t key_at;   /* in the arena */
    int32_t value;       /* words: the term id or -1 */
    int32_t exp_len;     /* identifiers: their terms are exp[exp_at : exp_at + exp_len] */
    Py_ssize_t exp_at;
} Entry;

typedef struct {
    uint32_t hash;
    int32_t entry; /* -1: free */
} Slot;

typedef struct {
    Slot *slots;
    Py_ssize_t size; /* power of two, at least twice the entries */
    char *arena;
    Py_ssize_t arena_len, arena_cap;
    Entry *entries;
    Py_ssize_t n, cap;
} Table;

static int table_resize(Table *t, Py_ssize_t size) {
    Slot *slots = PyMem_Malloc((size_t)size * sizeof(Slot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < size; i++) slots[i].entry = -1;
    for (Py_ssize_t e = 0; e < t->n; e++) {
        uint32_t h = t->entries[e].hash;
        Py_ssize_t at = h & (size - 1);
        while (slots[at].entry >= 0) at = (at + 1) & (size - 1);
        slots[at].hash = h;
        slots[at].entry = (int32_t)e;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->size = size;
    return 0;
}

static void table_free(Table *t) {
    void *bufs[] = {t->slots, t->arena, t->entries};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) PyMem_Free(bufs[i]);
    memset(t, 0, sizeof *t);
}

/* The entry of s[0:n], or -1 with `*slot` where it would go. */
static Py_ssize_t table_find(const Table *t, const uint8_t *s, Py_ssize_t n, uint32_t h, Py_ssize_t *slot) {
    Py_ssize_t mask = t->size - 1, at = h & mask;
    for (int32_t e; (e = t->slots[at].entry) >= 0; at = (at + 1) & mask)
        if (t->slots[at].hash == h && t->entries[e].len == n &&
            memcmp(t->arena + t->entries[e].key_at, s, (size_t)n) == 0)
            return e;
    *slot = at;
    return -1;
}

/* Add s[0:n] (not present; `slot` from table_find) with `value`; its entry number, or -1 on error. */
static Py_ssize_t table_add(Table *t, const uint8_t *s, Py_ssize_t n, uint32_t h, Py_ssize_t slot, int32_t value) {
    if (n > INT32_MAX || t->n >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "too many or too long identifiers");
        return -1;
    }
    Py_ssize_t e = t->n;
    if (grow((void **)&t->arena, &t->arena_cap, t->arena_len + n, 1) < 0 ||
        grow((void **)&t->entries, &t->cap, e + 1, sizeof(Entry)) < 0)
        return -1;
    memcpy(t->arena + t->arena_len, s, (size_t)n);
    t->entries[e] = (Entry){.hash = h, .len = (int32_t)n, .key_at = t->arena_len, .value = value};
    t->arena_len += n;
    t->slots[slot].hash = h;
    t->slots[slot].entry = (int32_t)e;
    t->n++;
    if (2 * t->n > t->size && table_resize(t, 2 * t->size) < 0) return -1;
    return e;
}

typedef struct {
    int64_t doc;  /* the document that last counted the term, or -1 */
    int64_t slot; /* where its count is in the pairs */
} TermMark;

typedef struct {
    PyObject_HEAD
    PyObject *word_token; /* lower-cased word (str) -> its token (str), or None for a stop word */
    Table tokens;         /* token -> term id (= entry number) */
    Table words;          /* lower-cased word -> term id, or -1 for none */
    Table idents;         /* identifier -> its terms (Entry.exp_at, exp_len) */
    int32_t *exp;
    Py_ssize_t exp_n, exp_cap;
    /* per term: the document that last counted it and where its count is */
    TermMark *marks;
    Py_ssize_t terms_cap;
    /* output */
    int32_t *pair_term, *pair_count;
    Py_ssize_t pairs, pairs_cap;
    int64_t *doc_len, *doc_pairs;
    Py_ssize_t docs, docs_cap;
    /* the identifiers of the current file's path */
    int32_t *path_ids;
    Py_ssize_t path_n, path_cap;
    uint8_t *scratch; /* an identifier lower-cased */
    Py_ssize_t scratch_cap;
    int busy; /* in add_file: word_token calling back into the counter would invalidate its table slots */
} TermCounter;

/* The term id of token s[0:n], numbered when new. */
static Py_ssize_t token_id(TermCounter *self, const uint8_t *s, Py_ssize_t n) {
    uint32_t h = hash_bytes(s, n);
    Py_ssize_t slot, e = table_find(&self->tokens, s, n, h, &slot);
    if (e >= 0) return e;
    e = table_add(&self->tokens, s, n, h, slot, 0);
    if (e < 0) return -1;
    if (e >= self->terms_cap) {
        Py_ssize_t old = self->terms_cap;
        if (grow((void **)&self->marks, &self->terms_cap, e + 1, sizeof(TermMark)) < 0) return -1;
        for (Py_ssize_t t = old; t < self->terms_cap; t++) self->marks[t].doc = -1;
    }
    return e;
}

/* The term id of lower-cased word s[0:n] (-1: none, a stop word), from word_token on first sight; -2 on error. */
static Py_ssize_t word_term(TermCounter *self, const uint8_t *s, Py_ssize_t n) {
    uint32_t h = hash_bytes(s, n);
    Py_ssize_t slot, e = table_find(&self->words, s, n, h, &slot);
    if (e >= 0) return self->words.entries[e].value;
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
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "word_token must return str or None");
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

/* The entry of identifier s[0:n] (h: its hash_bytes), added and expanded when new; -1 with an exception set. */
static Py_ssize_t ident_id(TermCounter *self, const uint8_t *s, Py_ssize_t n, uint32_t h) {
    Py_ssize_t slot, e = table_find(&self->idents, s, n, h, &slot);
    if (e >= 0) return e;
    Py_ssize_t at = self->exp_n, count = expand_identifier(self, s, n);
    if (count < 0) return -1;
    /* expanding adds no identifier, so `slot` is still free */
    e = table_add(&self->idents, s, n, h, slot, 0);
    if (e < 0) return -1;
    self->idents.entries[e].exp_at = at;
    self->idents.entries[e].exp_len = (int32_t)count;
    return e;
}

/* Count identifier `id`'s terms `weight` times into document self->docs. */
static int count_ident(TermCounter *self, Py_ssize_t id, int32_t weight) {
    int64_t doc = self->docs;
    const Entry *ident = &self->idents.entries[id];
    const int32_t *terms = self->exp + ident->exp_at;
    int32_t n = ident->exp_len;
    Py_ssize_t cap = self->pairs_cap, cap2 = self->pairs_cap; /* both arrays grow alike */
    if (grow((void **)&self->pair_term, &cap, self->pairs + n, sizeof(int32_t)) < 0 ||
        grow((void **)&self->pair_count, &cap2, self->pairs + n, sizeof(int32_t)) < 0)
        return -1;
    self->pairs_cap = cap < cap2 ? cap : cap2;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = terms[i];
        TermMark *mark = &self->marks[t];
        if (mark->doc != doc) {
            mark->doc = doc;
            mark->slot = self->pairs;
            self->pair_term[self->pairs] = t;
            self->pair_count[self->pairs] = weight;
            self->pairs++;
        } else {
            self->pair_count[mark->slot] += weight;
        }
    }
    self->doc_len[doc] += (int64_t)weight * n;
    return 0;
}

/* Every identifier of s[start:end], counted `weight` times; with `comments`, only the text after each line's
   first comment mark. */
static int scan(TermCounter *self, const uint8_t *s, Py_ssize_t start, Py_ssize_t end, int32_t weight, int comments) {
    Py_ssize_t i = start;
    while (i < end) {
        if (comments) { /* find the line's first mark; skip the line when it has none */
            while (i < end && s[i] != '\n') {
                uint8_t c = s[i];
                if (c == '#' || c == '*') break;
                if (c == '/' && i + 1 < end && (s[i + 1] == '/' || s[i + 1] == '*')) break;
                if ((c == '"' || c == '\'') && i + 2 < end && s[i + 1] == c && s[i + 2] == c) break;
                i++;
            }
            if (i < end && s[i] == '\n') {
                i++;
                continue;
            }
        }
        while (i < end && !(comments && s[i] == '\n')) {
            if (!IS_START(s[i])) {
                i++;
                continue;
            }
            uint32_t h = HASH_STEP(HASH_SEED, s[i]); /* hashed while scanned: one pass over its bytes */
            Py_ssize_t j = i + 1;
            for (; j < end && IS_PART(s[j]); j++) h = HASH_STEP(h, s[j]);
            Py_ssize_t id = ident_id(self, s + i, j - i, h);
            if (id < 0 || count_ident(self, id, weight) < 0) return -1;
            i = j;
        }
        if (comments && i < end) i++; /* the newline */
    }
    return 0;
}

static int scan_object(TermCounter *self, PyObject *text, int32_t weight) {
    char *s;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(text, &s, &n) < 0) return -1;
    return scan(self, (const uint8_t *)s, 0, n, weight, 0);
}

static int new_doc(TermCounter *self) {
    Py_ssize_t cap = self->docs_cap, cap2 = self->docs_cap;
    if (grow((void **)&self->doc_len, &cap, self->docs + 1, sizeof(int64_t)) < 0 ||
        grow((void **)&self->doc_pairs, &cap2, self->docs + 1, sizeof(int64_t)) < 0)
        return -1;
    self->docs_cap = cap < cap2 ? cap : cap2;
    self->doc_len[self->docs] = 0;
    return 0;
}

PyDoc_STRVAR(add_file_doc,
             "add_file(data, bounds, path, symbols, comment_weight, path_weight, symbol_weight, /) -> None\n\n"
             "One document per (start, end) byte range of `data` in `bounds`, with `path` (bytes) and the\n"
             "chunk's symbol names (bytes, one per range) counted in at their weights. After an error, the\n"
             "documents of the ranges before the failing one stay counted.");

static PyObject *add_file(TermCounter *self, PyObject *args) {
    PyObject *data_obj, *bounds, *path, *symbols;
    int comment_weight, path_weight, symbol_weight;
    if (!PyArg_ParseTuple(args, "OOO!Oiii", &data_obj, &bounds, &PyBytes_Type, &path, &symbols, &comment_weight,
                          &path_weight, &symbol_weight))
        return NULL;
    if (comment_weight < 0 || path_weight < 0 || symbol_weight < 0) {
        PyErr_SetString(PyExc_ValueError, "weights must be >= 0");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "add_file called from word_token: the counter is busy");
        return NULL;
    }
    Py_buffer data;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) return NULL;
    self->busy = 1;
    PyObject *result = NULL, *bounds_seq = NULL, *symbols_seq = NULL;
    Py_ssize_t doc_first = self->pairs;
    bounds_seq = PySequence_Fast(bounds, "bounds must be a sequence of (start, end)");
    if (bounds_seq == NULL) goto done;
    symbols_seq = PySequence_Fast(symbols, "symbols must be a sequence of bytes");
    if (symbols_seq == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(bounds_seq);
    if (PySequence_Fast_GET_SIZE(symbols_seq) != n) {
        PyErr_SetString(PyExc_ValueError, "one symbols entry per range");
        goto done;
    }
    /* the path's identifiers once per file (each also expanded on first sight) */
    self->path_n = 0;
    {
        char *p;
        Py_ssize_t plen;
        if (PyBytes_AsStringAndSize(path, &p, &plen) < 0) goto done;
        for (Py_ssize_t i = 0; i < plen;) {
            if (!IS_START((uint8_t)p[i])) {
                i++;
                continue;
            }
            Py_ssize_t j = i + 1;
            while (j < plen && IS_PART((uint8_t)p[j])) j++;
            Py_ssize_t id = ident_id(self, (const uint8_t *)p + i, j - i, hash_bytes((const uint8_t *)p + i, j - i));
            if (id < 0 || grow((void **)&self->path_ids, &self->path_cap, self->path_n + 1, sizeof(int32_t)) < 0)
                goto done;
            self->path_ids[self->path_n++] = (int32_t)id;
            i = j;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t start, end;
        PyObject *range = PySequence_Fast_GET_ITEM(bounds_seq, k);
        if (!PyTuple_Check(range)) {
            PyErr_SetString(PyExc_TypeError, "bounds must hold (start, end) tuples");
            goto done;
        }
        if (!PyArg_ParseTuple(range, "nn", &start, &end)) goto done;
        if (start < 0 || start > end || end > data.len) {
            PyErr_Format(PyExc_ValueError, "bounds: [%zd, %zd) is outside the data (%zd bytes)", start, end, data.len);
            goto done;
        }
        PyObject *names = PySequence_Fast_GET_ITEM(symbols_seq, k);
        if (!PyBytes_Check(names)) {
            PyErr_SetString(PyExc_TypeError, "symbols must be bytes");
            goto done;
        }
        if (new_doc(self) < 0) goto done;
        doc_first = self->pairs;
        const uint8_t *s = (const uint8_t *)data.buf;
        if (scan(self, s, start, end, 1, 0) < 0 || (comment_weight && scan(self, s, start, end, comment_weight, 1) < 0))
            goto done;
        if (path_weight)
            for (Py_ssize_t i = 0; i < self->path_n; i++)
                if (count_ident(self, self->path_ids[i], path_weight) < 0) goto done;
        if (symbol_weight && scan_object(self, names, symbol_weight) < 0) goto done;
        self->doc_pairs[self->docs] = self->pairs - doc_first;
        self->docs++;
    }
    result = Py_NewRef(Py_None);
done:
    if (result == NULL) { /* forget a half-counted document: its pairs, and its number in the terms' marks */
        for (Py_ssize_t p = doc_first; p < self->pairs; p++) self->marks[self->pair_term[p]].doc = -1;
        self->pairs = doc_first;
    }
    Py_XDECREF(bounds_seq);
    Py_XDECREF(symbols_seq);
    PyBuffer_Release(&data);
    self->busy = 0;
    return result;
}

PyDoc_STRVAR(sizes_doc, "sizes() -> (documents, pairs, identifiers)");

static PyObject *sizes(TermCounter *self, PyObject *Py_UNUSED(ignored)) {
    return Py_BuildValue("nnn", self->docs, self->pairs, self->idents.n);
}

static int writable(PyObject *obj, Py_buffer *view, Py_ssize_t items, Py_ssize_t itemsize, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got %zd", name, items * itemsize, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(export_doc,
             "export(doc_len, doc_pairs, terms, counts, /) -> None\n\n"
             "Fill the writable buffers (int64[documents] x2, int32[pairs] x2; see sizes()) with each document's\n"
             "length and number of distinct terms, and the (term, count) pairs in document order. The documents\n"
             "are moved out: the counter holds none afterwards (its identifiers and terms stay).");

static PyObject *export(TermCounter *self, PyObject *args) {
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3])) return NULL;
    const Py_ssize_t items[4] = {self->docs, self->docs, self->pairs, self->pairs};
    const Py_ssize_t size[4] = {8, 8, 4, 4};
    const void *src[4] = {self->doc_len, self->doc_pairs, self->pair_term, self->pair_count};
    const char *names[4] = {"doc_len", "doc_pairs", "terms", "counts"};
    Py_buffer views[4];
    int got = 0;
    for (; got < 4; got++)
        if (writable(objs[got], &views[got], items[got], size[got], names[got]) < 0) break;
    if (got == 4)
        for (int i = 0; i < 4; i++)
            if (items[i]) memcpy(views[i].buf, src[i], (size_t)(items[i] * size[i]));
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    if (got < 4) return NULL;
    /* moved out: the documents are gone from the counter (its memory is the build's peak) */
    PyMem_Free(self->pair_term);
    PyMem_Free(self->pair_count);
    PyMem_Free(self->doc_len);
    PyMem_Free(self->doc_pairs);
    self->pair_term = self->pair_count = NULL;
    self->doc_len = self->doc_pairs = NULL;
    self->pairs = self->pairs_cap = self->docs = self->docs_cap = 0;
    for (Py_ssize_t t = 0; t < self->terms_cap; t++) self->marks[t].doc = -1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(tokens_doc, "tokens() -> list[str]: every term, by id");

static PyObject *tokens(TermCounter *self, PyObject *Py_UNUSED(ignored)) {
    const Table *t = &self->tokens;
    PyObject *list = PyList_New(t->n);
    if (list == NULL) return NULL;
    for (Py_ssize_t e = 0; e < t->n; e++) {
        PyObject *token = PyUnicode_DecodeUTF8(t->arena + t->entries[e].key_at, t->entries[e].len, "surrogatepass");
        if (token == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, e, token);
    }
    return list;
}

static int TermCounter_init(TermCounter *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"word_token", NULL};
    PyObject *word_token;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", kwlist, &word_token)) return -1;
    if (!PyCallable_Check(word_token)) {
        PyErr_SetString(PyExc_TypeError, "word_token must be callable");
        return -1;
    }
    if (self->word_token != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TermCounter is already initialized");
        return -1;
    }
    self->word_token = Py_NewRef(word_token);
    if (table_resize(&self->tokens, 1 << 12) < 0 || table_resize(&self->words, 1 << 12) < 0 ||
        table_resize(&self->idents, 1 << 12) < 0)
        return -1;
    return 0;
}

static void TermCounter_dealloc(TermCounter *self) {
    Py_XDECREF(self->word_token);
    table_free(&self->tokens);
    table_free(&self->words);
    table_free(&self->idents);
    void *bufs[] = {self->exp,     self->marks,     self->pair_term, self->pair_count,
                    self->doc_len, self->doc_pairs, self->path_ids,  self->scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) PyMem_Free(bufs[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef counter_methods[] = {
    {"add_file", (PyCFunction)add_file, METH_VARARGS, add_file_doc},
    {"sizes", (PyCFunction)sizes, METH_NOARGS, sizes_doc},
    {"export", (PyCFunction)export, METH_VARARGS, export_doc},
    {"tokens", (PyCFunction)tokens, METH_NOARGS, tokens_doc},
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

PyDoc_STRVAR(csc_doc,
             "csc(rows, cols, data, n_cols, indptr, indices, out_data, /) -> None\n\n"
             "Scatter (row, col, value) triples (int32, int32, float32; in row order) into CSC arrays: indptr\n"
             "int64[n_cols + 1], indices int32[n] and out_data float32[n], rows ascending within a column.");

static PyObject *csc(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *objs[6];
    Py_ssize_t n_cols;
    if (!PyArg_ParseTuple(args, "OOOnOOO", &objs[0], &objs[1], &objs[2], &n_cols, &objs[3], &objs[4], &objs[5]))
        return NULL;
    if (n_cols < 0) {
        PyErr_SetString(PyExc_ValueError, "n_cols must be >= 0");
        return NULL;
    }
    Py_buffer views[6];
    int got = 0;
    PyObject *result = NULL;
    int64_t *next = NULL;
    if (PyObject_GetBuffer(objs[0], &views[0], PyBUF_C_CONTIGUOUS) < 0) return NULL;
    got = 1;
    Py_ssize_t n = views[0].len / 4;
    const Py_ssize_t items[6] = {n, n, n, n_cols + 1, n, n};
    const Py_ssize_t size[6] = {4, 4, 4, 8, 4, 4};
    const char *names[6] = {"rows", "cols", "data", "indptr", "indices", "out_data"};
    if (views[0].len % 4) {
        PyErr_SetString(PyExc_ValueError, "rows: int32 values");
        goto done;
    }
    for (; got < 6; got++) {
        if (got < 3) {
            if (PyObject_GetBuffer(objs[got], &views[got], PyBUF_C_CONTIGUOUS) < 0) goto done;
            if (views[got].len != items[got] * size[got]) {
                PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes", names[got], items[got] * size[got]);
                PyBuffer_Release(&views[got]);
                goto done;
            }
        } else if (writable(objs[got], &views[got], items[got], size[got], names[got]) < 0) {
            goto done;
        }
    }
    const int32_t *r = views[0].buf, *c = views[1].buf;
    const float *d = views[2].buf;
    int64_t *ptr = views[3].buf;
    int32_t *indices = views[4].buf;
    float *out = views[5].buf;
    memset(ptr, 0, (size_t)(n_cols + 1) * 8);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (c[i] < 0 || c[i] >= n_cols) {
            PyErr_Format(PyExc_ValueError, "cols: %d is not in [0, %zd)", (int)c[i], n_cols);
            goto done;
        }
        ptr[c[i] + 1]++;
    }
    for (Py_ssize_t j = 0; j < n_cols; j++) ptr[j + 1] += ptr[j];
    next = PyMem_Malloc((size_t)(n_cols ? n_cols : 1) * 8);
    if (next == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(next, ptr, (size_t)n_cols * 8);
    for (Py_ssize_t i = 0; i < n; i++) { /* stable: rows keep their (ascending) input order */
        int64_t at = next[c[i]]++;
        indices[at] = r[i];
        out[at] = d[i];
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(next);
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    return result;
}

PyDoc_STRVAR(chunk_bytes_doc,
             "chunk_bytes(data, spans, /) -> list[tuple[int, int]]\n\n"
             "Each (first line, last line) of `spans` (1-based, inclusive) as the byte range of those lines in\n"
             "`data`, the last newline included: index.py's _chunk_bytes without an offset per line (numpy's\n"
             "temporaries for every line cost more than counting the terms of the same bytes).");

typedef struct {
    const char *s;
    Py_ssize_t len, line, at; /* line `line` (0-based) starts at byte `at` */
} LineCursor;

/* Where line k (0-based) starts: after the k-th newline that is not the last byte, else len (as _line_starts). */
static Py_ssize_t line_offset(LineCursor *c, Py_ssize_t k) {
    if (k < c->line) c->line = c->at = 0;
    while (c->line < k) {
        const char *nl = c->at < c->len ? memchr(c->s + c->at, '\n', (size_t)(c->len - c->at)) : NULL;
        if (nl == NULL || nl + 1 >= c->s + c->len) return c->len;
        c->at = nl + 1 - c->s;
        c->line++;
    }
    return c->at;
}

static PyObject *chunk_bytes(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *data_obj, *spans;
    if (!PyArg_ParseTuple(args, "OO", &data_obj, &spans)) return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *seq = PySequence_Fast(spans, "spans must be a sequence of (first line, last line)"), *out = NULL;
    if (seq == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    out = PyList_New(n);
    LineCursor cursor = {data.buf, data.len, 0, 0};
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        Py_ssize_t first, last;
        PyObject *span = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(span)) {
            PyErr_SetString(PyExc_TypeError, "spans must hold (first line, last line) tuples");
            Py_CLEAR(out);
            break;
        }
        if (!PyArg_ParseTuple(span, "nn", &first, &last)) {
            Py_CLEAR(out);
            break;
        }
        if (first < 1 || last < first - 1) {
            PyErr_Format(PyExc_ValueError, "spans: lines %zd..%zd are not a range of 1-based lines", first, last);
            Py_CLEAR(out);
            break;
        }
        Py_ssize_t start = line_offset(&cursor, first - 1), end = line_offset(&cursor, last);
        PyObject *pair = Py_BuildValue("nn", start, end);
        if (pair == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, pair);
    }
done:
    Py_XDECREF(seq);
    PyBuffer_Release(&data);
    return out;
}

static PyMethodDef methods[] = {
    {"csc", csc, METH_VARARGS, csc_doc},
    {"chunk_bytes", chunk_bytes, METH_VARARGS, chunk_bytes_doc},
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
    if (PyModule_AddObjectRef(m, "TermCounter", (PyObject *)&TermCounterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
