/* Native kernels of the search index build (module codewell.search._build; search/index/builder.py).

   unit_trigrams:   the distinct case-folded trigrams of each unit of a content chunk (at most 2^16 units), as
                    uint32 keys `trigram's low 16 bits << 16 | unit within the chunk` grouped by partition (the
                    trigram's first byte), units ascending within a partition: half the bytes of uint64 keys,
                    and the temporary files of the Linux tree are 0.7 GB that way.
   merge_partition: one partition's keys (from every chunk, in chunk order) turned into its posting lists:
                    raw uint32 arrays for rare trigrams, portable roaring bitmaps for the others.
   doc_lines:       a document's newline table (low 16 bits per newline, first line of each page) and unit cuts.

   Why native (issue #30): through numpy, each chunk's trigrams were sorted twice (np.sort of every trigram
   occurrence to drop repeats, then an argsort by partition) and each partition sorted again, and every common
   trigram's bitmap was built by a Python call: the build of the Linux tree cost 4.4x codesearch's CPU. Here a
   bit set of the 2^24 trigrams drops a unit's repeats as they are read, and both groupings are counting sorts
   (linear, stable), so units stay ascending without ever being compared.

   Trigrams fold A-Z to a-z only (as the queries do) and never span two units. Every offset is checked against
   the buffers; nothing is read outside them. The GIL is released while scanning and merging. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { PARTITIONS = 256, PART_TRIGRAMS = 1 << 16, RAW_MAX = 8, TRIGRAMS = 1 << 24, CHUNK_UNITS = 1 << 16 };

/* Portable roaring format (github.com/RoaringBitmap/RoaringFormatSpec), as search/_scan.c reads it. */
enum { SERIAL_COOKIE_NO_RUNCONTAINER = 12346, SERIAL_COOKIE = 12347, NO_OFFSET_THRESHOLD = 4, ARRAY_MAX = 4096 };

static uint8_t FOLD[256];

static int get_buffer(PyObject *obj, Py_buffer *view, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "%s: expected a bytes-like object", name);
        return -1;
    }
    return 0;
}

/* A growable byte buffer (plain malloc: filled without the GIL). */
typedef struct {
    uint8_t *data;
    size_t length, capacity;
} Bytes;

static int bytes_reserve(Bytes *b, size_t extra) {
    if (b->length + extra <= b->capacity) return 0;
    size_t capacity = b->capacity ? b->capacity : 1 << 16;
    while (capacity < b->length + extra) capacity *= 2;
    uint8_t *grown = realloc(b->data, capacity);
    if (grown == NULL) return -1;
    b->data = grown;
    b->capacity = capacity;
    return 0;
}

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* unit_trigrams ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(unit_trigrams_doc,
             "unit_trigrams(content, starts) -> (keys, bounds)\n\n"
             "The distinct case-folded trigrams of the units of `content` that `starts` (int64) delimits: each\n"
             "unit's start offset and the end of the last, at most 65536 units. `keys` is uint32\n"
             "`(trigram & 0xFFFF) << 16 | unit` (unit: its rank in `starts`), grouped by the trigram's first\n"
             "byte, units ascending within each group; `bounds` (257 x int64) delimits the groups.");

static PyObject *unit_trigrams(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *content_obj, *starts_obj;
    if (!PyArg_ParseTuple(args, "OO", &content_obj, &starts_obj)) return NULL;
    Py_buffer content, starts_view;
    if (get_buffer(content_obj, &content, "content") < 0) return NULL;
    if (get_buffer(starts_obj, &starts_view, "starts") < 0) {
        PyBuffer_Release(&content);
        return NULL;
    }
    PyObject *result = NULL, *keys_obj = NULL, *bounds_obj = NULL;
    uint64_t *seen = NULL;
    uint32_t *tris = NULL;
    size_t *unit_end = NULL;
    const int64_t *starts = (const int64_t *)starts_view.buf;
    Py_ssize_t n_units = starts_view.len / (Py_ssize_t)sizeof(int64_t) - 1;
    if (starts_view.len % (Py_ssize_t)sizeof(int64_t) != 0 || n_units < 0 || n_units > CHUNK_UNITS) {
        PyErr_SetString(PyExc_ValueError, "starts: expected int64 offsets of at most 65536 units and their end");
        goto done;
    }
    for (Py_ssize_t u = 0; u < n_units; u++) {
        if (starts[u] < 0 || starts[u] > starts[u + 1] || starts[u + 1] > content.len) {
            PyErr_Format(PyExc_ValueError, "starts: unit %zd [%lld, %lld) is not inside the content", u,
                         (long long)starts[u], (long long)starts[u + 1]);
            goto done;
        }
    }
    /* A unit has at most (its length - 2) distinct trigrams: the whole chunk's bound sizes the list. */
    size_t bound = 0;
    for (Py_ssize_t u = 0; u < n_units; u++) {
        int64_t length = starts[u + 1] - starts[u];
        if (length > 2) bound += (size_t)(length - 2);
    }
    seen = calloc(TRIGRAMS / 64, sizeof(uint64_t));
    tris = malloc((bound ? bound : 1) * sizeof(uint32_t));
    unit_end = malloc((size_t)(n_units + 1) * sizeof(size_t));
    if (seen == NULL || tris == NULL || unit_end == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    size_t count = 0;
    size_t part_count[PARTITIONS] = {0};
    const uint8_t *data = (const uint8_t *)content.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t u = 0; u < n_units; u++) {
        const uint8_t *p = data + starts[u], *end = data + starts[u + 1];
        size_t unit_first = count;
        if (end - p >= 3) {
            uint32_t tri = ((uint32_t)FOLD[p[0]] << 8) | FOLD[p[1]];
            for (p += 2; p < end; p++) {
                tri = ((tri << 8) | FOLD[*p]) & (TRIGRAMS - 1);
                uint64_t bit = (uint64_t)1 << (tri & 63);
                uint64_t *word = &seen[tri >> 6];
                if (!(*word & bit)) {
                    *word |= bit;
                    tris[count++] = tri;
                }
            }
            /* Clear this unit's bits: by trigram for a short list, the whole set when that touches less. */
            if (count - unit_first > TRIGRAMS / 64 / 8) {
                memset(seen, 0, TRIGRAMS / 8);
            } else {
                for (size_t i = unit_first; i < count; i++) seen[tris[i] >> 6] = 0;
            }
            for (size_t i = unit_first; i < count; i++) part_count[tris[i] >> 16]++;
        }
        unit_end[u] = count;
    }
    Py_END_ALLOW_THREADS
    keys_obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * sizeof(uint32_t)));
    bounds_obj = PyBytes_FromStringAndSize(NULL, (PARTITIONS + 1) * sizeof(int64_t));
    if (keys_obj == NULL || bounds_obj == NULL) goto done;
    int64_t *bounds = (int64_t *)PyBytes_AS_STRING(bounds_obj);
    uint32_t *keys = (uint32_t *)PyBytes_AS_STRING(keys_obj);
    Py_BEGIN_ALLOW_THREADS
    size_t next[PARTITIONS];
    size_t at = 0;
    for (int part = 0; part < PARTITIONS; part++) {
        bounds[part] = (int64_t)at;
        next[part] = at;
        at += part_count[part];
    }
    bounds[PARTITIONS] = (int64_t)at;
    size_t i = 0;
    for (Py_ssize_t u = 0; u < n_units; u++) {
        for (; i < unit_end[u]; i++) keys[next[tris[i] >> 16]++] = (tris[i] << 16) | (uint32_t)u;
    }
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, keys_obj, bounds_obj);
done:
    Py_XDECREF(keys_obj);
    Py_XDECREF(bounds_obj);
    free(seen);
    free(tris);
    free(unit_end);
    PyBuffer_Release(&content);
    PyBuffer_Release(&starts_view);
    return result;
}

/* merge_partition ---------------------------------------------------------------------------------------- */

/* Append the portable roaring serialization of the ascending ids `units[0..n)` to `out`. Each container is
   stored as the smallest of array, bitmap and runs (as pyroaring's optimized bitmaps are). */
static int roaring_write(Bytes *out, const uint32_t *units, size_t n) {
    size_t containers = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || (units[i] >> 16) != (units[i - 1] >> 16)) containers++;
    }
    /* Per container: first index, cardinality, number of runs, chosen kind (0 array, 1 bitmap, 2 runs). */
    size_t *first = malloc(containers * sizeof(size_t) * 3 + containers);
    if (first == NULL) return -1;
    size_t *cardinality = first + containers, *runs = cardinality + containers;
    uint8_t *kind = (uint8_t *)(runs + containers);
    size_t c = 0;
    int any_runs = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || (units[i] >> 16) != (units[i - 1] >> 16)) {
            first[c] = i;
            cardinality[c] = 0;
            runs[c] = 0;
            c++;
        }
        cardinality[c - 1]++;
        if (i == first[c - 1] || units[i] != units[i - 1] + 1) runs[c - 1]++;
    }
    size_t data_size = 0;
    for (c = 0; c < containers; c++) {
        size_t plain = cardinality[c] > ARRAY_MAX ? 8192 : 2 * cardinality[c];
        size_t as_runs = 2 + 4 * runs[c];
        kind[c] = as_runs < plain ? 2 : cardinality[c] > ARRAY_MAX ? 1 : 0;
        any_runs |= kind[c] == 2;
        data_size += kind[c] == 2 ? as_runs : plain;
    }
    int offsets = !any_runs || containers >= NO_OFFSET_THRESHOLD;
    size_t header = any_runs ? 4 + (containers + 7) / 8 : 8;
    header += 4 * containers + (offsets ? 4 * containers : 0);
    if (bytes_reserve(out, header + data_size) < 0) {
        free(first);
        return -1;
    }
    uint8_t *base = out->data + out->length, *p = base;
    memset(base, 0, header + data_size);
    if (any_runs) {
        put_u32(p, SERIAL_COOKIE | (uint32_t)((containers - 1) << 16));
        p += 4;
        for (c = 0; c < containers; c++) {
            if (kind[c] == 2) p[c / 8] |= (uint8_t)(1 << (c % 8));
        }
        p += (containers + 7) / 8;
    } else {
        put_u32(p, SERIAL_COOKIE_NO_RUNCONTAINER);
        put_u32(p + 4, (uint32_t)containers);
        p += 8;
    }
    for (c = 0; c < containers; c++, p += 4) {
        put_u16(p, (uint16_t)(units[first[c]] >> 16));
        put_u16(p + 2, (uint16_t)(cardinality[c] - 1));
    }
    uint8_t *offset_table = p;
    if (offsets) p += 4 * containers;
    for (c = 0; c < containers; c++) {
        if (offsets) put_u32(offset_table + 4 * c, (uint32_t)(p - base));
        const uint32_t *v = units + first[c];
        size_t card = cardinality[c];
        if (kind[c] == 2) {
            put_u16(p, (uint16_t)runs[c]);
            p += 2;
            size_t start = 0;
            for (size_t i = 1; i <= card; i++) {
                if (i == card || v[i] != v[i - 1] + 1) {
                    put_u16(p, (uint16_t)v[start]);
                    put_u16(p + 2, (uint16_t)(i - 1 - start));
                    p += 4;
                    start = i;
                }
            }
        } else if (kind[c] == 1) {
            for (size_t i = 0; i < card; i++) p[(v[i] & 0xFFFF) >> 3] |= (uint8_t)(1 << (v[i] & 7));
            p += 8192;
        } else {
            for (size_t i = 0; i < card; i++, p += 2) put_u16(p, (uint16_t)v[i]);
        }
    }
    out->length += header + data_size;
    free(first);
    return 0;
}

PyDoc_STRVAR(merge_partition_doc,
             "merge_partition(parts, unit_ids, partition) -> (postings, trigrams, counts, sizes)\n\n"
             "The posting lists of one partition from its keys: `parts` lists the uint32 keys that unit_trigrams\n"
             "wrote for it, every chunk's in chunk order (so each trigram's units ascend over their\n"
             "concatenation), and `unit_ids` the id of each chunk's first unit. For each trigram present, in\n"
             "ascending order: `trigrams` and `counts` (uint32) and `sizes` (uint64) of its list in `postings`:\n"
             "raw little-endian uint32 units when it has at most 8, else a portable roaring bitmap.");

static PyObject *merge_partition(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *parts, *unit_ids_obj;
    int partition;
    if (!PyArg_ParseTuple(args, "O!O!i", &PyList_Type, &parts, &PyList_Type, &unit_ids_obj, &partition)) return NULL;
    if (partition < 0 || partition >= PARTITIONS) {
        PyErr_SetString(PyExc_ValueError, "partition: expected 0..255");
        return NULL;
    }
    Py_ssize_t n_parts = PyList_GET_SIZE(parts);
    if (PyList_GET_SIZE(unit_ids_obj) != n_parts) {
        PyErr_SetString(PyExc_ValueError, "unit_ids: expected one per part");
        return NULL;
    }
    Py_buffer *views = calloc((size_t)(n_parts ? n_parts : 1), sizeof(Py_buffer));
    uint64_t *unit_ids = calloc((size_t)(n_parts ? n_parts : 1), sizeof(uint64_t));
    if (views == NULL || unit_ids == NULL) {
        free(views);
        free(unit_ids);
        return PyErr_NoMemory();
    }
    Py_ssize_t opened = 0;
    PyObject *result = NULL;
    uint32_t *counts = NULL, *units = NULL;
    size_t *next = NULL;
    Bytes out = {0}, trigrams = {0}, sizes = {0}, lengths = {0};
    size_t total = 0;
    for (Py_ssize_t k = 0; k < n_parts; k++) {
        unsigned long long id = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(unit_ids_obj, k));
        if (PyErr_Occurred()) goto done;
        if (id + CHUNK_UNITS - 1 > 0xFFFFFFFFULL) {
            PyErr_SetString(PyExc_ValueError, "unit_ids: unit ids must fit in 32 bits");
            goto done;
        }
        unit_ids[k] = id;
    }
    for (; opened < n_parts; opened++) {
        if (get_buffer(PyList_GET_ITEM(parts, opened), &views[opened], "parts") < 0) goto done;
        if (views[opened].len % 4 != 0) {
            PyErr_SetString(PyExc_ValueError, "parts: expected uint32 keys");
            opened++;
            goto done;
        }
        total += (size_t)views[opened].len / 4;
    }
    counts = calloc(PART_TRIGRAMS, sizeof(uint32_t));
    next = malloc(PART_TRIGRAMS * sizeof(size_t));
    units = malloc((total ? total : 1) * sizeof(uint32_t));
    if (counts == NULL || next == NULL || units == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int bad = 0, failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n_parts; k++) {
        const uint32_t *keys = views[k].buf;
        size_t n = (size_t)views[k].len / 4;
        for (size_t i = 0; i < n; i++) counts[keys[i] >> 16]++;
    }
    {
        size_t at = 0;
        for (size_t t = 0; t < PART_TRIGRAMS; t++) {
            next[t] = at;
            at += counts[t];
        }
        /* A stable counting sort by trigram: each trigram's units keep their (ascending) input order. */
        for (Py_ssize_t k = 0; k < n_parts; k++) {
            const uint32_t *keys = views[k].buf;
            size_t n = (size_t)views[k].len / 4;
            uint32_t first = (uint32_t)unit_ids[k];
            for (size_t i = 0; i < n; i++) units[next[keys[i] >> 16]++] = first + (keys[i] & 0xFFFF);
        }
        size_t at_unit = 0;
        for (size_t t = 0; t < PART_TRIGRAMS && !failed && !bad; t++) {
            size_t n = counts[t];
            if (n == 0) continue;
            const uint32_t *list = units + at_unit;
            at_unit += n;
            for (size_t i = 1; i < n; i++) {
                if (list[i] <= list[i - 1]) bad = 1; /* a repeated or out-of-order unit: not this format */
            }
            size_t before = out.length;
            if (n <= RAW_MAX) {
                failed = bytes_reserve(&out, 4 * n) < 0;
                for (size_t i = 0; !failed && i < n; i++) put_u32(out.data + out.length + 4 * i, list[i]);
                if (!failed) out.length += 4 * n;
            } else {
                failed = roaring_write(&out, list, n) < 0;
            }
            failed = failed || bytes_reserve(&trigrams, 4) < 0 || bytes_reserve(&lengths, 4) < 0 ||
                     bytes_reserve(&sizes, 8) < 0;
            if (failed) break;
            *(uint32_t *)(trigrams.data + trigrams.length) = ((uint32_t)partition << 16) | (uint32_t)t;
            *(uint32_t *)(lengths.data + lengths.length) = (uint32_t)n;
            *(uint64_t *)(sizes.data + sizes.length) = (uint64_t)(out.length - before);
            trigrams.length += 4;
            lengths.length += 4;
            sizes.length += 8;
        }
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "parts: a trigram's units are not ascending (chunks out of order?)");
        goto done;
    }
    /* "y#" turns a NULL pointer (nothing written) into None: pass "" for empty results. */
#define OR_EMPTY(b) ((b).data != NULL ? (const char *)(b).data : "")
    result = Py_BuildValue("(y#y#y#y#)", OR_EMPTY(out), (Py_ssize_t)out.length, OR_EMPTY(trigrams),
                           (Py_ssize_t)trigrams.length, OR_EMPTY(lengths), (Py_ssize_t)lengths.length, OR_EMPTY(sizes),
                           (Py_ssize_t)sizes.length);
#undef OR_EMPTY
done:
    for (Py_ssize_t k = 0; k < opened; k++) PyBuffer_Release(&views[k]);
    free(views);
    free(unit_ids);
    free(counts);
    free(next);
    free(units);
    free(out.data);
    free(trigrams.data);
    free(lengths.data);
    free(sizes.data);
    return result;
}

/* doc_lines ---------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(doc_lines_doc,
             "doc_lines(data, unit_bytes, page_shift) -> (nl_low, page_lines, unit_cuts, newlines)\n\n"
             "A document's line and unit tables: `nl_low` (uint16) each newline's offset modulo 2^page_shift;\n"
             "`page_lines` (int64) per page of 2^page_shift bytes, the number of newlines before it; `unit_cuts`\n"
             "(int64) the relative start of each unit (0, then after the first newline at or past every\n"
             "unit_bytes, as long as a byte follows); `newlines` their count.");

static PyObject *doc_lines(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *data_obj;
    Py_ssize_t unit_bytes;
    int page_shift;
    if (!PyArg_ParseTuple(args, "Oni", &data_obj, &unit_bytes, &page_shift)) return NULL;
    if (unit_bytes < 1 || page_shift < 1 || page_shift > 16) {
        PyErr_SetString(PyExc_ValueError, "unit_bytes must be positive and page_shift within 1..16");
        return NULL;
    }
    Py_buffer view;
    if (get_buffer(data_obj, &view, "data") < 0) return NULL;
    const uint8_t *data = view.buf;
    Py_ssize_t size = view.len, newlines = 0;
    for (const uint8_t *p = data; (p = memchr(p, '\n', (size_t)(data + size - p))) != NULL; p++) newlines++;
    Py_ssize_t pages = size ? ((size - 1) >> page_shift) + 1 : 0;
    Py_ssize_t max_units = size > unit_bytes ? size / unit_bytes + 2 : 1;
    PyObject *low_obj = PyBytes_FromStringAndSize(NULL, newlines * 2);
    PyObject *pages_obj = PyBytes_FromStringAndSize(NULL, pages * 8);
    int64_t *cuts = malloc((size_t)max_units * sizeof(int64_t));
    PyObject *result = NULL;
    if (low_obj == NULL || pages_obj == NULL || cuts == NULL) {
        if (cuts == NULL) PyErr_NoMemory();
        goto done;
    }
    uint16_t *low = (uint16_t *)PyBytes_AS_STRING(low_obj);
    int64_t *page_lines = (int64_t *)PyBytes_AS_STRING(pages_obj);
    Py_ssize_t n_cuts = 0, line = 0, page = 0;
    uint32_t mask = (1u << page_shift) - 1;
    cuts[n_cuts++] = 0;
    /* The next unit ends at the first newline at or past this offset (as searchsorted(nl, k*unit_bytes - 1)). */
    Py_ssize_t cut_at = size > unit_bytes ? unit_bytes - 1 : size;
    for (const uint8_t *p = data; (p = memchr(p, '\n', (size_t)(data + size - p))) != NULL; p++) {
        Py_ssize_t i = p - data;
        for (; ((Py_ssize_t)page << page_shift) <= i; page++) page_lines[page] = line;
        low[line++] = (uint16_t)(i & mask);
        if (i >= cut_at) {
            if (i + 1 < size) cuts[n_cuts++] = i + 1;
            while (cut_at <= i) cut_at += unit_bytes;
        }
    }
    for (; page < pages; page++) page_lines[page] = line;
    PyObject *cuts_obj = PyBytes_FromStringAndSize((const char *)cuts, n_cuts * 8);
    if (cuts_obj == NULL) goto done;
    result = Py_BuildValue("(OONn)", low_obj, pages_obj, cuts_obj, newlines);
done:
    Py_XDECREF(low_obj);
    Py_XDECREF(pages_obj);
    free(cuts);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"unit_trigrams", unit_trigrams, METH_VARARGS, unit_trigrams_doc},
    {"merge_partition", merge_partition, METH_VARARGS, merge_partition_doc},
    {"doc_lines", doc_lines, METH_VARARGS, doc_lines_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "codewell.search._build", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__build(void) {
    for (int c = 0; c < 256; c++) FOLD[c] = (uint8_t)(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
    return PyModule_Create(&module);
}
