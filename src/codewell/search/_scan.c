/* Native verification kernels for search/verify.py (module codewell.search._scan).

   find_lines: the lines of content runs that hold an ASCII literal, one offset per line, with ripgrep's
   --no-unicode semantics (a case-insensitive literal folds A-Z/a-z only, as RE2 in Latin-1 mode does).
   map_lines:  content offsets to (document, global line) through the shard's newline tables.
   posting_keep: the units of a short sorted list that a stored posting list holds, read in place from
               the mmap'd postings (a raw uint32 array, or a roaring bitmap in its portable format).

   Why native: a selective query (`mutex_lock file:^fs/ext4/`) finds a few dozen lines in ~140 KB of
   candidate units. Through Hyperscan each match was a Python callback plus a line lookup by Python
   bisection, which cost more than the scan itself. Here a whole batch is one call that holds no Python
   objects while scanning, so the GIL is released and other searches run meanwhile. Likewise a filtered
   query keeps a few hundred units of its filter: testing those in place beats decoding three posting
   lists of ~18k units each into bitmaps and intersecting them.

   The literal search is the "packed pair" technique (as in Rust's memchr crate): two bytes of the
   needle, the rarest in source code, are compared 16 positions at a time (SSE2, the x86-64 baseline),
   and each candidate position is verified in full. Other machines use the same logic one position at a
   time. Every offset is bounds-checked against the buffers; nothing is read outside a run. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Rank of each byte by frequency in source code (0 = rarest), measured on the Linux source. */
static const uint8_t BYTE_RANK[256] = {
    0,   1,   2,   3,   4,   5,   6,   7,   8,   251, 250, 9,   76,  10,  11,  12,  13,  14,  15,  16,  17,  18,
    19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  255, 169, 205, 196, 164, 170, 185, 165, 231, 232, 230, 174,
    236, 221, 203, 206, 241, 214, 209, 198, 195, 186, 190, 181, 192, 179, 187, 233, 182, 216, 208, 159, 168, 225,
    197, 224, 215, 234, 204, 199, 191, 226, 160, 183, 213, 211, 212, 210, 217, 172, 223, 228, 229, 200, 189, 180,
    188, 178, 166, 176, 171, 177, 152, 253, 163, 245, 218, 243, 242, 254, 237, 220, 227, 249, 167, 207, 240, 235,
    246, 244, 238, 184, 248, 247, 252, 239, 219, 202, 222, 201, 175, 193, 173, 194, 161, 56,  154, 142, 147, 129,
    145, 131, 123, 120, 139, 128, 112, 126, 148, 121, 100, 136, 113, 96,  84,  93,  137, 117, 119, 106, 124, 115,
    146, 111, 144, 108, 97,  102, 130, 125, 91,  89,  116, 118, 105, 103, 143, 92,  99,  87,  94,  114, 134, 138,
    132, 88,  85,  95,  101, 86,  107, 90,  153, 109, 140, 141, 150, 135, 104, 127, 57,  29,  81,  83,  74,  79,
    30,  58,  59,  31,  60,  61,  32,  33,  75,  73,  78,  77,  34,  62,  35,  36,  37,  38,  63,  64,  39,  65,
    66,  40,  67,  68,  41,  42,  98,  151, 157, 162, 158, 156, 155, 149, 80,  110, 122, 82,  43,  133, 69,  70,
    44,  71,  72,  45,  46,  47,  48,  49,  50,  51,  52,  53,  54,  55};

typedef struct {
    const uint8_t *needle; /* folded (lower case) when caseless */
    Py_ssize_t length;
    uint8_t fold[256]; /* content byte -> the byte it must equal in `needle` */
    Py_ssize_t i1, i2; /* the packed pair: positions of the two rarest needle bytes */
    uint8_t mask1, mask2, byte1, byte2; /* content | mask == byte at those positions */
} Needle;

typedef struct {
    int64_t *items;
    Py_ssize_t count, capacity;
} Offsets;

static int is_letter(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static Py_ssize_t rank_of(uint8_t c, int caseless) {
    if (caseless && is_letter(c)) {
        uint8_t lower = c | 0x20, upper = lower & ~0x20;
        return BYTE_RANK[lower] > BYTE_RANK[upper] ? BYTE_RANK[lower] : BYTE_RANK[upper];
    }
    return BYTE_RANK[c];
}

static void needle_init(Needle *n, const uint8_t *needle, Py_ssize_t length, int caseless) {
    n->needle = needle;
    n->length = length;
    for (int c = 0; c < 256; c++) {
        n->fold[c] = (uint8_t)((caseless && c >= 'A' && c <= 'Z') ? c | 0x20 : c);
    }
    n->i1 = 0;
    for (Py_ssize_t i = 1; i < length; i++) {
        if (rank_of(needle[i], caseless) < rank_of(needle[n->i1], caseless)) n->i1 = i;
    }
    n->i2 = n->i1;
    for (Py_ssize_t i = 0; i < length; i++) {
        if (i != n->i1 && (n->i2 == n->i1 || rank_of(needle[i], caseless) < rank_of(needle[n->i2], caseless))) {
            n->i2 = i;
        }
    }
    n->mask1 = (caseless && is_letter(needle[n->i1])) ? 0x20 : 0;
    n->mask2 = (caseless && is_letter(needle[n->i2])) ? 0x20 : 0;
    n->byte1 = needle[n->i1];
    n->byte2 = needle[n->i2];
}

static int needle_at(const Needle *n, const uint8_t *at) {
    for (Py_ssize_t k = 0; k < n->length; k++) {
        if (n->fold[at[k]] != n->needle[k]) return 0;
    }
    return 1;
}

/* First position >= `pos` in [pos, end) where the needle starts and ends inside the range, or -1. */
static Py_ssize_t find_needle(const Needle *n, const uint8_t *data, Py_ssize_t pos, Py_ssize_t end) {
    const Py_ssize_t last = end - n->length; /* last possible start */
#if defined(__SSE2__)
    const __m128i m1 = _mm_set1_epi8((char)n->mask1), m2 = _mm_set1_epi8((char)n->mask2);
    const __m128i b1 = _mm_set1_epi8((char)n->byte1), b2 = _mm_set1_epi8((char)n->byte2);
    while (pos + 15 <= last) {
        __m128i c1 = _mm_or_si128(_mm_loadu_si128((const __m128i *)(data + pos + n->i1)), m1);
        __m128i c2 = _mm_or_si128(_mm_loadu_si128((const __m128i *)(data + pos + n->i2)), m2);
        unsigned bits = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(c1, b1), _mm_cmpeq_epi8(c2, b2)));
        while (bits) {
            Py_ssize_t at = pos + __builtin_ctz(bits);
            if (needle_at(n, data + at)) return at;
            bits &= bits - 1;
        }
        pos += 16;
    }
#endif
    for (; pos <= last; pos++) {
        if ((data[pos + n->i1] | n->mask1) == n->byte1 && (data[pos + n->i2] | n->mask2) == n->byte2 &&
            needle_at(n, data + pos)) {
            return pos;
        }
    }
    return -1;
}

static int offsets_push(Offsets *o, int64_t value) {
    if (o->count == o->capacity) {
        Py_ssize_t capacity = o->capacity ? o->capacity * 2 : 64;
        int64_t *items = realloc(o->items, (size_t)capacity * sizeof(int64_t));
        if (items == NULL) return -1;
        o->items = items;
        o->capacity = capacity;
    }
    o->items[o->count++] = value;
    return 0;
}

static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len % itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: buffer length is not a multiple of %zd", what, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *offsets_to_list(const Offsets *o) {
    PyObject *list = PyList_New(o->count);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < o->count; i++) {
        PyObject *value = PyLong_FromLongLong(o->items[i]);
        if (value == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, value);
    }
    return list;
}

PyDoc_STRVAR(find_lines_doc,
             "find_lines(content, needle, case_sensitive, runs, budget) -> list[int]\n\n"
             "One offset (the first match's start) in each line of the [start, end) `runs` (a list of\n"
             "(start, end) tuples) of `content` that holds the ASCII `needle` (lower case when not case_sensitive),\n"
             "ascending; stops after `budget` lines (-1: no limit). Lines end at b'\\n'.");

static PyObject *find_lines(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *content_obj, *runs_obj;
    const char *needle;
    Py_ssize_t needle_len, budget;
    int case_sensitive;
    if (!PyArg_ParseTuple(args, "Oy#pOn", &content_obj, &needle, &needle_len, &case_sensitive, &runs_obj, &budget)) {
        return NULL;
    }
    if (needle_len == 0) {
        PyErr_SetString(PyExc_ValueError, "needle: empty");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < needle_len; i++) {
        uint8_t c = (uint8_t)needle[i];
        if (c >= 0x80 || c == '\n' || (!case_sensitive && c >= 'A' && c <= 'Z')) {
            PyErr_SetString(PyExc_ValueError, "needle: ASCII without newlines, lower case when case-insensitive");
            return NULL;
        }
    }
    Py_buffer content;
    if (!PyList_Check(runs_obj)) {
        PyErr_SetString(PyExc_TypeError, "runs: a list of (start, end) tuples");
        return NULL;
    }
    if (get_buffer(content_obj, &content, 1, "content") < 0) return NULL;
    /* Copied out of the list: the scan runs without the GIL, while other threads may run Python code. */
    Py_ssize_t run_count = PyList_GET_SIZE(runs_obj);
    int64_t *bounds = PyMem_Malloc((size_t)(run_count ? run_count : 1) * 2 * sizeof(int64_t));
    if (bounds == NULL) {
        PyBuffer_Release(&content);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t r = 0; r < run_count; r++) {
        PyObject *run = PyList_GET_ITEM(runs_obj, r);
        long long start, end;
        if (!PyTuple_Check(run) || !PyArg_ParseTuple(run, "LL", &start, &end)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "runs: a list of (start, end) tuples");
            goto invalid;
        }
        if (start < 0 || start > end || end > content.len) {
            PyErr_Format(PyExc_ValueError, "runs: [%lld, %lld) is outside the content", start, end);
            goto invalid;
        }
        bounds[2 * r] = start;
        bounds[2 * r + 1] = end;
    }
    const uint8_t *data = content.buf;
    Needle n;
    needle_init(&n, (const uint8_t *)needle, needle_len, !case_sensitive);
    Offsets found = {NULL, 0, 0};
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t r = 0; r < run_count && !failed; r++) {
        Py_ssize_t pos = (Py_ssize_t)bounds[2 * r], end = (Py_ssize_t)bounds[2 * r + 1];
        while (pos < end) {
            Py_ssize_t at = find_needle(&n, data, pos, end);
            if (at < 0) break;
            if (offsets_push(&found, at) < 0) {
                failed = 1;
                break;
            }
            if (budget >= 0 && found.count >= budget) {
                r = run_count;
                break;
            }
            const uint8_t *newline = memchr(data + at + n.length, '\n', (size_t)(end - at - n.length));
            pos = newline == NULL ? end : (Py_ssize_t)(newline - data) + 1;
        }
    }
    Py_END_ALLOW_THREADS;
    PyMem_Free(bounds);
    PyBuffer_Release(&content);
    PyObject *result = failed ? PyErr_NoMemory() : offsets_to_list(&found);
    free(found.items);
    return result;
invalid:
    PyMem_Free(bounds);
    PyBuffer_Release(&content);
    return NULL;
}

/* Leftmost index in sorted values[lo:hi) whose value is >= target (bisect_left). */
static Py_ssize_t bisect_u16(const uint16_t *values, Py_ssize_t lo, Py_ssize_t hi, uint16_t target) {
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (values[mid] < target) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* The document holding `offset`: the last i with starts[i] <= offset (starts ascending, n entries). */
static Py_ssize_t doc_of(const int64_t *starts, Py_ssize_t n, int64_t offset) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (starts[mid] <= offset) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo - 1;
}

PyDoc_STRVAR(map_lines_doc,
             "map_lines(offsets, starts, doc_page0, nl_pages, nl_low, page_shift) -> list[tuple[int, int]]\n\n"
             "(document, global line) of each content offset in the list `offsets`, through the shard's\n"
             "tables (int64 buffers, nl_low uint16): the line is the first newline at or after the offset.");

static PyObject *map_lines(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *offsets, *objs[4];
    int shift;
    if (!PyArg_ParseTuple(args, "O!OOOOi", &PyList_Type, &offsets, &objs[0], &objs[1], &objs[2], &objs[3], &shift)) {
        return NULL;
    }
    if (shift < 1 || shift > 16) return PyErr_Format(PyExc_ValueError, "page_shift: %d is not in 1..16", shift);
    Py_buffer views[4];
    const Py_ssize_t sizes[4] = {8, 8, 8, 2};
    const char *names[4] = {"starts", "doc_page0", "nl_pages", "nl_low"};
    for (int i = 0; i < 4; i++) {
        if (get_buffer(objs[i], &views[i], sizes[i], names[i]) < 0) {
            while (i-- > 0) PyBuffer_Release(&views[i]);
            return NULL;
        }
    }
    const int64_t *starts = views[0].buf, *page0 = views[1].buf, *pages = views[2].buf;
    const uint16_t *low = views[3].buf;
    const Py_ssize_t n_starts = views[0].len / 8, n_docs = views[1].len / 8, n_pages = views[2].len / 8;
    const Py_ssize_t n_low = views[3].len / 2;
    const int64_t mask = ((int64_t)1 << shift) - 1;
    Py_ssize_t count = PyList_GET_SIZE(offsets);
    PyObject *result = PyList_New(count);
    Py_ssize_t doc = -1;
    int64_t doc_start = 0, doc_end = -1;
    for (Py_ssize_t i = 0; result != NULL && i < count; i++) {
        long long offset = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));
        if (offset == -1 && PyErr_Occurred()) {
            Py_CLEAR(result);
            break;
        }
        if (offset < doc_start || offset >= doc_end) {
            doc = doc_of(starts, n_starts, offset);
            if (doc < 0 || doc + 1 >= n_starts || doc >= n_docs) {
                PyErr_Format(PyExc_ValueError, "offsets: %lld is outside the content", offset);
                Py_CLEAR(result);
                break;
            }
            doc_start = starts[doc];
            doc_end = starts[doc + 1];
        }
        int64_t rel = offset - doc_start;
        int64_t page = page0[doc] + (rel >> shift);
        if (page < 0 || page + 1 >= n_pages || pages[page] < 0 || pages[page] > pages[page + 1] ||
            pages[page + 1] > n_low) {
            PyErr_Format(PyExc_ValueError, "nl_pages: page %lld is outside the tables", (long long)page);
            Py_CLEAR(result);
            break;
        }
        Py_ssize_t line = bisect_u16(low, (Py_ssize_t)pages[page], (Py_ssize_t)pages[page + 1], (uint16_t)(rel & mask));
        PyObject *pair = Py_BuildValue("(nn)", doc, line);
        if (pair == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, pair);
    }
    for (int i = 0; i < 4; i++) PyBuffer_Release(&views[i]);
    return result;
}


/* The [start, end) runs of an int64 buffer of 2N entries, checked against the content's length. */
static int read_runs(PyObject *obj, Py_ssize_t content_len, Py_buffer *view, Py_ssize_t *count) {
    if (get_buffer(obj, view, 16, "runs") < 0) return -1;
    const int64_t *bounds = view->buf;
    *count = view->len / 16;
    for (Py_ssize_t r = 0; r < *count; r++) {
        if (bounds[2 * r] < 0 || bounds[2 * r] > bounds[2 * r + 1] || bounds[2 * r + 1] > content_len) {
            PyErr_Format(PyExc_ValueError, "runs: [%lld, %lld) is outside the content", (long long)bounds[2 * r],
                         (long long)bounds[2 * r + 1]);
            PyBuffer_Release(view);
            return -1;
        }
    }
    return 0;
}

static PyObject *bytes_of(const int64_t *items, Py_ssize_t count) {
    return PyBytes_FromStringAndSize((const char *)items, count * (Py_ssize_t)sizeof(int64_t));
}

PyDoc_STRVAR(find_hits_doc,
             "find_hits(content, needle, case_sensitive, runs, budget, starts, doc_page0, nl_pages, nl_low,\n"
             "          page_shift) -> tuple[bytes, bytes, bytes]\n\n"
             "find_lines and map_lines in one call, without a Python object per match: `runs` is an int64\n"
             "buffer of [start, end) pairs; the answer is three native-endian int64 arrays as bytes (one entry\n"
             "per matching line, ascending): the document, the global line and the first match's offset.");

static PyObject *find_hits(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *content_obj, *runs_obj, *objs[4];
    const char *needle;
    Py_ssize_t needle_len, budget;
    int case_sensitive, shift;
    if (!PyArg_ParseTuple(args, "Oy#pOnOOOOi", &content_obj, &needle, &needle_len, &case_sensitive, &runs_obj,
                          &budget, &objs[0], &objs[1], &objs[2], &objs[3], &shift)) {
        return NULL;
    }
    if (needle_len == 0) {
        PyErr_SetString(PyExc_ValueError, "needle: empty");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < needle_len; i++) {
        uint8_t c = (uint8_t)needle[i];
        if (c >= 0x80 || c == '\n' || (!case_sensitive && c >= 'A' && c <= 'Z')) {
            PyErr_SetString(PyExc_ValueError, "needle: ASCII without newlines, lower case when case-insensitive");
            return NULL;
        }
    }
    if (shift < 1 || shift > 16) return PyErr_Format(PyExc_ValueError, "page_shift: %d is not in 1..16", shift);
    Py_buffer content, runs, views[4];
    if (get_buffer(content_obj, &content, 1, "content") < 0) return NULL;
    Py_ssize_t run_count;
    if (read_runs(runs_obj, content.len, &runs, &run_count) < 0) {
        PyBuffer_Release(&content);
        return NULL;
    }
    const Py_ssize_t sizes[4] = {8, 8, 8, 2};
    const char *names[4] = {"starts", "doc_page0", "nl_pages", "nl_low"};
    for (int i = 0; i < 4; i++) {
        if (get_buffer(objs[i], &views[i], sizes[i], names[i]) < 0) {
            while (i-- > 0) PyBuffer_Release(&views[i]);
            PyBuffer_Release(&runs);
            PyBuffer_Release(&content);
            return NULL;
        }
    }
    const int64_t *bounds = runs.buf, *starts = views[0].buf, *page0 = views[1].buf, *pages = views[2].buf;
    const uint16_t *low = views[3].buf;
    const Py_ssize_t n_starts = views[0].len / 8, n_docs = views[1].len / 8, n_pages = views[2].len / 8;
    const Py_ssize_t n_low = views[3].len / 2;
    const int64_t mask = ((int64_t)1 << shift) - 1;
    const uint8_t *data = content.buf;
    Needle n;
    needle_init(&n, (const uint8_t *)needle, needle_len, !case_sensitive);
    Offsets docs = {NULL, 0, 0}, lines = {NULL, 0, 0}, firsts = {NULL, 0, 0};
    int failed = 0; /* 1: out of memory, 2: the tables do not cover an offset */
    int64_t bad = 0;
    Py_BEGIN_ALLOW_THREADS;
    Py_ssize_t doc = -1;
    int64_t doc_start = 0, doc_end = -1;
    for (Py_ssize_t r = 0; r < run_count && !failed; r++) {
        Py_ssize_t pos = (Py_ssize_t)bounds[2 * r], end = (Py_ssize_t)bounds[2 * r + 1];
        while (pos < end) {
            Py_ssize_t at = find_needle(&n, data, pos, end);
            if (at < 0) break;
            if (at < doc_start || at >= doc_end) {
                doc = doc_of(starts, n_starts, at);
                if (doc < 0 || doc + 1 >= n_starts || doc >= n_docs) {
                    failed = 2;
                    bad = at;
                    break;
                }
                doc_start = starts[doc];
                doc_end = starts[doc + 1];
            }
            int64_t rel = at - doc_start;
            int64_t page = page0[doc] + (rel >> shift);
            if (page < 0 || page + 1 >= n_pages || pages[page] < 0 || pages[page] > pages[page + 1] ||
                pages[page + 1] > n_low) {
                failed = 2;
                bad = at;
                break;
            }
            Py_ssize_t line = bisect_u16(low, (Py_ssize_t)pages[page], (Py_ssize_t)pages[page + 1], (uint16_t)(rel & mask));
            if (offsets_push(&docs, doc) < 0 || offsets_push(&lines, line) < 0 || offsets_push(&firsts, at) < 0) {
                failed = 1;
                break;
            }
            if (budget >= 0 && firsts.count >= budget) {
                r = run_count;
                break;
            }
            const uint8_t *newline = memchr(data + at + n.length, '\n', (size_t)(end - at - n.length));
            pos = newline == NULL ? end : (Py_ssize_t)(newline - data) + 1;
        }
    }
    Py_END_ALLOW_THREADS;
    for (int i = 0; i < 4; i++) PyBuffer_Release(&views[i]);
    PyBuffer_Release(&runs);
    PyBuffer_Release(&content);
    PyObject *result = NULL;
    if (failed == 1) {
        PyErr_NoMemory();
    } else if (failed == 2) {
        PyErr_Format(PyExc_ValueError, "offset %lld is outside the shard's line tables", (long long)bad);
    } else {
        PyObject *a = bytes_of(docs.items, docs.count), *b = bytes_of(lines.items, lines.count);
        PyObject *c = bytes_of(firsts.items, firsts.count);
        if (a != NULL && b != NULL && c != NULL) result = PyTuple_Pack(3, a, b, c);
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
    }
    free(docs.items);
    free(lines.items);
    free(firsts.items);
    return result;
}

PyDoc_STRVAR(line_bounds_doc,
             "line_bounds(content, needle, case_sensitive, runs, budget, follow=b'', min_follow=0) -> bytes\n\n"
             "The lines of the int64 [start, end) `runs` buffer that hold the ASCII `needle` (lower case when\n"
             "not case_sensitive), as one int64 array of (line start, line end) pairs in bytes, ascending (the\n"
             "end excludes the newline). With `follow` (a 32-byte bitmap of byte values) only an occurrence\n"
             "followed by at least `min_follow` bytes of that class counts. A regex that requires the literal\n"
             "(and the class run) is then matched on these lines only.");

static PyObject *line_bounds(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *content_obj, *runs_obj;
    const char *needle;
    const char *follow = "";
    Py_ssize_t needle_len, budget, follow_len = 0, min_follow = 0;
    int case_sensitive;
    if (!PyArg_ParseTuple(args, "Oy#pOn|y#n", &content_obj, &needle, &needle_len, &case_sensitive, &runs_obj, &budget,
                          &follow, &follow_len, &min_follow)) {
        return NULL;
    }
    if (needle_len == 0) {
        PyErr_SetString(PyExc_ValueError, "needle: empty");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < needle_len; i++) {
        uint8_t c = (uint8_t)needle[i];
        if (c >= 0x80 || c == '\n' || (!case_sensitive && c >= 'A' && c <= 'Z')) {
            PyErr_SetString(PyExc_ValueError, "needle: ASCII without newlines, lower case when case-insensitive");
            return NULL;
        }
    }
    if ((follow_len != 0 && follow_len != 32) || min_follow < 0 || (min_follow > 0 && follow_len == 0)) {
        PyErr_SetString(PyExc_ValueError, "follow: a 32-byte class bitmap with min_follow >= 0");
        return NULL;
    }
    uint8_t in_class[256];
    for (int c = 0; c < 256; c++) in_class[c] = follow_len ? (uint8_t)((follow[c >> 3] >> (c & 7)) & 1) : 0;
    in_class['\n'] = 0; /* a match never spans lines */
    Py_buffer content, runs;
    if (get_buffer(content_obj, &content, 1, "content") < 0) return NULL;
    Py_ssize_t run_count;
    if (read_runs(runs_obj, content.len, &runs, &run_count) < 0) {
        PyBuffer_Release(&content);
        return NULL;
    }
    const int64_t *bounds = runs.buf;
    const uint8_t *data = content.buf;
    Needle n;
    needle_init(&n, (const uint8_t *)needle, needle_len, !case_sensitive);
    Offsets found = {NULL, 0, 0};
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t r = 0; r < run_count && !failed; r++) {
        Py_ssize_t run_start = (Py_ssize_t)bounds[2 * r], pos = run_start, end = (Py_ssize_t)bounds[2 * r + 1];
        while (pos < end) {
            Py_ssize_t at = find_needle(&n, data, pos, end);
            if (at < 0) break;
            if (min_follow > 0) { /* the class run after the needle: else look on from the next byte */
                Py_ssize_t k = at + n.length, stop = at + n.length + min_follow;
                if (stop > end) break; /* no later occurrence in this run has room either */
                while (k < stop && in_class[data[k]]) k++;
                if (k < stop) {
                    pos = at + 1;
                    continue;
                }
            }
            /* The line starts after the last newline before the match, and not before the run. */
            Py_ssize_t start = at;
            while (start > run_start && data[start - 1] != '\n') start--;
            const uint8_t *newline = memchr(data + at + n.length, '\n', (size_t)(end - at - n.length));
            Py_ssize_t line_end = newline == NULL ? end : (Py_ssize_t)(newline - data);
            if (offsets_push(&found, start) < 0 || offsets_push(&found, line_end) < 0) {
                failed = 1;
                break;
            }
            if (budget >= 0 && found.count / 2 >= budget) {
                r = run_count;
                break;
            }
            pos = line_end + 1;
        }
    }
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&runs);
    PyBuffer_Release(&content);
    PyObject *result = failed ? PyErr_NoMemory() : bytes_of(found.items, found.count);
    free(found.items);
    return result;
}

PyDoc_STRVAR(line_texts_doc,
             "line_texts(content, offsets) -> list[str]\n\n"
             "The text of the line holding each offset in the list `offsets` (from the byte after the previous\n"
             "newline to the next newline or the end, without it), decoded as UTF-8 with errors replaced:\n"
             "what `content[rfind(b'\\n', 0, at) + 1 : find(b'\\n', at)].decode('utf-8', 'replace')` gives, with\n"
             "the line end at the content's end when no newline follows.");

static PyObject *line_texts(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *content_obj, *offsets;
    if (!PyArg_ParseTuple(args, "OO!", &content_obj, &PyList_Type, &offsets)) return NULL;
    Py_buffer content;
    if (get_buffer(content_obj, &content, 1, "content") < 0) return NULL;
    const char *data = content.buf;
    Py_ssize_t count = PyList_GET_SIZE(offsets);
    PyObject *result = PyList_New(count);
    for (Py_ssize_t i = 0; result != NULL && i < count; i++) {
        long long at = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));
        if (at == -1 && PyErr_Occurred()) {
            Py_CLEAR(result);
            break;
        }
        if (at < 0 || at > content.len) {
            PyErr_Format(PyExc_ValueError, "offsets: %lld is outside the content", at);
            Py_CLEAR(result);
            break;
        }
        Py_ssize_t start = (Py_ssize_t)at, end;
        while (start > 0 && data[start - 1] != '\n') start--;
        const char *newline = memchr(data + at, '\n', (size_t)(content.len - at));
        end = newline == NULL ? content.len : (Py_ssize_t)(newline - data);
        PyObject *text = PyUnicode_DecodeUTF8(data + start, end - start, "replace");
        if (text == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, text);
    }
    PyBuffer_Release(&content);
    return result;
}

/* Portable roaring format (github.com/RoaringBitmap/RoaringFormatSpec), read in place. */
enum { SERIAL_COOKIE_NO_RUNCONTAINER = 12346, SERIAL_COOKIE = 12347, NO_OFFSET_THRESHOLD = 4 };

typedef struct {
    const uint8_t *data; /* the serialized bitmap */
    Py_ssize_t length;
    Py_ssize_t count;       /* containers */
    const uint8_t *runs;    /* run-container flags (one bit per container), or NULL */
    const uint8_t *headers; /* count x (uint16 key, uint16 cardinality - 1) */
    const uint8_t *offsets; /* count x uint32 container offsets, or NULL (then computed in order) */
} Roaring;

static uint16_t read_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t read_u32(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24); }

static int roaring_open(Roaring *r, const uint8_t *data, Py_ssize_t length) {
    r->data = data;
    r->length = length;
    r->runs = r->offsets = NULL;
    if (length < 8) return -1;
    uint32_t cookie = read_u32(data);
    Py_ssize_t at;
    if ((cookie & 0xFFFF) == SERIAL_COOKIE) {
        r->count = (Py_ssize_t)(cookie >> 16) + 1;
        r->runs = data + 4;
        at = 4 + (r->count + 7) / 8;
    } else if (cookie == SERIAL_COOKIE_NO_RUNCONTAINER) {
        r->count = (Py_ssize_t)read_u32(data + 4);
        at = 8;
    } else {
        return -1;
    }
    if (r->count > 65536 || at + 4 * r->count > length) return -1;
    r->headers = data + at;
    at += 4 * r->count;
    if (r->runs == NULL || r->count >= NO_OFFSET_THRESHOLD) {
        if (at + 4 * r->count > length) return -1;
        r->offsets = data + at;
    }
    return 0;
}

/* Size in bytes of container `i` at byte offset `at`, or -1 when it does not fit in the buffer. */
static Py_ssize_t container_size(const Roaring *r, Py_ssize_t i, Py_ssize_t at) {
    Py_ssize_t cardinality = (Py_ssize_t)read_u16(r->headers + 4 * i + 2) + 1;
    Py_ssize_t size;
    if (r->runs != NULL && (r->runs[i / 8] >> (i % 8)) & 1) {
        if (at + 2 > r->length) return -1;
        size = 2 + 4 * (Py_ssize_t)read_u16(r->data + at);
    } else {
        size = cardinality > 4096 ? 8192 : 2 * cardinality;
    }
    return at + size <= r->length ? size : -1;
}

/* Does container `i` (at byte offset `at`) hold the low 16 bits `low`? */
static int container_has(const Roaring *r, Py_ssize_t i, Py_ssize_t at, uint16_t low) {
    const uint8_t *c = r->data + at;
    Py_ssize_t cardinality = (Py_ssize_t)read_u16(r->headers + 4 * i + 2) + 1;
    if (r->runs != NULL && (r->runs[i / 8] >> (i % 8)) & 1) {
        Py_ssize_t lo = 0, hi = read_u16(c); /* runs: (start, length - 1) pairs, by start */
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (read_u16(c + 2 + 4 * mid) <= low) lo = mid + 1; else hi = mid;
        }
        if (lo == 0) return 0;
        uint16_t start = read_u16(c + 2 + 4 * (lo - 1)), extra = read_u16(c + 4 + 4 * (lo - 1));
        return (uint32_t)low <= (uint32_t)start + extra;
    }
    if (cardinality > 4096) return (c[low / 8] >> (low % 8)) & 1;
    Py_ssize_t lo = 0, hi = cardinality;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (read_u16(c + 2 * mid) < low) lo = mid + 1; else hi = mid;
    }
    return lo < cardinality && read_u16(c + 2 * lo) == low;
}

/* Byte offset of each container, checked to lie inside the buffer; -1 when the data is malformed. */
static int container_offsets(const Roaring *r, Py_ssize_t *at) {
    Py_ssize_t next = (r->headers - r->data) + 4 * r->count;
    for (Py_ssize_t i = 0; i < r->count; i++) {
        at[i] = r->offsets != NULL ? (Py_ssize_t)read_u32(r->offsets + 4 * i) : next;
        Py_ssize_t size = at[i] >= 0 ? container_size(r, i, at[i]) : -1;
        if (size < 0) return -1;
        next = at[i] + size;
    }
    return 0;
}

PyDoc_STRVAR(posting_keep_doc,
             "posting_keep(postings, start, end, raw, units) -> list[int]\n\n"
             "The ids in the ascending list `units` that the posting list stored in postings[start:end]\n"
             "holds: a raw little-endian uint32 array when `raw`, else a portable roaring bitmap.");

static PyObject *posting_keep(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *postings_obj, *units;
    Py_ssize_t start, end;
    int raw;
    if (!PyArg_ParseTuple(args, "OnnpO!", &postings_obj, &start, &end, &raw, &PyList_Type, &units)) return NULL;
    Py_buffer postings;
    if (get_buffer(postings_obj, &postings, 1, "postings") < 0) return NULL;
    PyObject *kept = NULL;
    Py_ssize_t at[1024]; /* container offsets: ids below 2^26 (a shard's units), checked below */
    Roaring r = {0};
    if (start < 0 || start > end || end > postings.len || (raw && (end - start) % 4 != 0)) {
        PyErr_Format(PyExc_ValueError, "postings: [%zd, %zd) is not a stored list", start, end);
        goto done;
    }
    const uint8_t *data = (const uint8_t *)postings.buf + start;
    if (!raw) {
        if (roaring_open(&r, data, end - start) < 0 || r.count > (Py_ssize_t)(sizeof at / sizeof at[0]) ||
            container_offsets(&r, at) < 0) {
            PyErr_SetString(PyExc_ValueError, "postings: not a portable roaring bitmap this reader handles");
            goto done;
        }
    }
    kept = PyList_New(0);
    Py_ssize_t container = 0, count = raw ? (end - start) / 4 : 0, lo = 0;
    for (Py_ssize_t i = 0; kept != NULL && i < PyList_GET_SIZE(units); i++) {
        PyObject *item = PyList_GET_ITEM(units, i);
        long long unit = PyLong_AsLongLong(item);
        if (unit < 0 || unit > 0xFFFFFFFFLL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "units: ids are uint32");
            Py_CLEAR(kept);
            break;
        }
        int found;
        if (raw) { /* units ascend: each search starts where the previous one ended */
            Py_ssize_t hi = count;
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (read_u32(data + 4 * mid) < (uint32_t)unit) lo = mid + 1; else hi = mid;
            }
            found = lo < count && read_u32(data + 4 * lo) == (uint32_t)unit;
        } else {
            uint16_t key = (uint16_t)(unit >> 16);
            while (container < r.count && read_u16(r.headers + 4 * container) < key) container++;
            found = container < r.count && read_u16(r.headers + 4 * container) == key &&
                    container_has(&r, container, at[container], (uint16_t)(unit & 0xFFFF));
        }
        if (found && PyList_Append(kept, item) < 0) Py_CLEAR(kept);
    }
done:
    PyBuffer_Release(&postings);
    return kept;
}

static PyMethodDef methods[] = {
    {"find_lines", find_lines, METH_VARARGS, find_lines_doc},
    {"map_lines", map_lines, METH_VARARGS, map_lines_doc},
    {"posting_keep", posting_keep, METH_VARARGS, posting_keep_doc},
    {"find_hits", find_hits, METH_VARARGS, find_hits_doc},
    {"line_bounds", line_bounds, METH_VARARGS, line_bounds_doc},
    {"line_texts", line_texts, METH_VARARGS, line_texts_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "codewell.search._scan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
