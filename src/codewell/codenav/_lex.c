/* Native C symbol scanner for codenav (module codewell.codenav._lex).

   scan_c(data): what codenav keeps about one C file, without a syntax tree:
     - definitions, the way ctags-style tools find them: function definitions (`type name(...) {`),
       struct/union/enum tags with a body, typedef names, enum constants, fields, global variables
       (file-scope declarations that are not prototypes nor `extern`), `#define` names;
     - every identifier occurrence (comments, strings and character literals skipped; keywords,
       directive names, goto labels not counted) grouped by name: "line:col:role;line:col:role..."
       (role d definition, i inside an #include, m after `.`, `->` or `::`, r otherwise);
     - `#include` targets.
   scan_c(data, file_id): the same, with symbols and occurrence rows shaped as the rows of codenav's `symbols`
   and `occurrences` tables for that file id (no row for a name that occurs only as its definitions, an empty
   one for a defined name that never occurs, the positions packed by pack_positions; see codenav/store.py).
   Writer(path).scan(data, file_id): those rows, and the #includes as `imports` rows, inserted into the index
   file being built through SQLite's C API (the index build's path: no Python object per row).

   Why native: tree-sitter parses this C at ~3.5 MB per CPU second and the Python walk over its captures
   costs as much again; the build budget (+60 % over the search shard) needs ~19 MB per CPU second. A
   lexer plus a small statement scanner runs at well over 100 MB/s and builds the grouped rows directly,
   so Python never sees one object per identifier.

   The statement scanner keeps a stack of brace frames (file, function body, struct/union body, enum
   body, other block, initializer). Preprocessor conditionals are followed like ctags does: at `#else`
   or `#elif` the frame stack goes back to what it was at the `#if`, and after `#endif` it is what the
   first branch left, so `#ifdef X  if (a) {  #else  if (b) {  #endif` opens one brace, not two.

   Every offset is bounds-checked against the input. The lexing, parsing, grouping and (Writer) the SQLite
   statements run without the GIL, so that a thread scanning a big file or committing the index does not stop the
   process's other threads (a job worker's main thread handling SIGTERM): that code touches no Python object and
   allocates with malloc; the result's Python objects are built after it, with the GIL. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the GIL ------------------------------------------------------------------------------------------ */

/* `released` is this thread's state while its call runs without the GIL; what needs the GIL inside such a stretch
   (decoding a non-ASCII name for SQLite) takes it back for a moment with gil_hold and gil_resume. */
static _Thread_local PyThreadState *released;

static void gil_release(void) { released = PyEval_SaveThread(); }

/* Take the GIL back if this thread's call released it; whether it had (for gil_resume). */
static int gil_hold(void) {
    PyThreadState *state = released;
    if (state == NULL) return 0;
    released = NULL;
    PyEval_RestoreThread(state);
    return 1;
}

static void gil_resume(int was) {
    if (was) gil_release();
}

/* scan_c and Writer.scan over fewer bytes keep the GIL: ~10 ms of work, and no wait to take it back (up to Python's
   5 ms switch interval when another thread runs Python: a call per small file paid it each time, 2-2.5x the
   writer's wall time on a Linux subtree beside a busy thread). */
#define RELEASE_BYTES ((Py_ssize_t)256 << 10)

/* SQLite built thread-safe (Debian's is: serialized): its calls may run without the GIL. Without it, Python's
   own sqlite3 module would not be safe in threads either; the Writer then keeps the GIL. */
static int sqlite_threads;

/* ---- tokens ---------------------------------------------------------------------------------------- */

enum { T_IDENT, T_KEYWORD, T_PUNCT, T_LITERAL, T_PP_START, T_PP_END };

/* Keyword classes. */
enum {
    K_NONE,
    K_TYPE,      /* int, char, size_t...: a type (not an identifier for tree-sitter either) */
    K_TAG,       /* struct, union, enum */
    K_TYPEDEF,   /* typedef */
    K_EXTERN,    /* extern */
    K_QUAL,      /* static, const, inline...: ignored in declarations */
    K_ATTR,      /* __attribute__, __declspec, asm...: followed by a parenthesised group to skip */
    K_GOTO,      /* goto: the next identifier is a label */
    K_STMT,      /* return, if, sizeof...: never part of a declaration's name */
    K_DEFINED    /* `defined` inside #if */
};

/* Preprocessor directive kinds. */
enum { PP_OTHER, PP_DEFINE, PP_INCLUDE, PP_IF, PP_ELSE, PP_ENDIF };

typedef struct {
    uint32_t start, end; /* byte offsets of the token in the input */
    uint32_t line, col;  /* 1-based line and byte column */
    uint8_t type;
    uint8_t sub; /* the punctuation byte, the keyword class or the directive kind */
    uint8_t in_pp; /* the token is inside a directive line */
    uint32_t hash;
} Token;

typedef struct {
    Token *items;
    Py_ssize_t count, capacity;
} Tokens;

static int tokens_grow(Tokens *t) {
    Py_ssize_t capacity = t->capacity ? t->capacity * 2 : 1024;
    Token *items = realloc(t->items, (size_t)capacity * sizeof(Token));
    if (items == NULL) return -1;
    t->items = items;
    t->capacity = capacity;
    return 0;
}

/* Appends a token (written in place: building it on the stack and copying it cost a sixth of the scan). */
static inline int tokens_push(Tokens *t, uint32_t start, uint32_t end, uint32_t line, uint32_t col, uint8_t type,
                              uint8_t sub, uint8_t in_pp, uint32_t hash) {
    if (t->count == t->capacity && tokens_grow(t) < 0) return -1;
    Token *token = &t->items[t->count++];
    token->start = start;
    token->end = end;
    token->line = line;
    token->col = col;
    token->type = type;
    token->sub = sub;
    token->in_pp = in_pp;
    token->hash = hash;
    return 0;
}

static uint32_t hash_bytes(const uint8_t *p, Py_ssize_t n) {
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* ---- keywords -------------------------------------------------------------------------------------- */

typedef struct {
    const char *word;
    uint8_t cls;
} Keyword;

static const Keyword KEYWORDS[] = {
    /* types: C's own and those tree-sitter-c parses as primitive_type */
    {"void", K_TYPE}, {"char", K_TYPE}, {"short", K_TYPE}, {"int", K_TYPE}, {"long", K_TYPE},
    {"float", K_TYPE}, {"double", K_TYPE}, {"signed", K_TYPE}, {"unsigned", K_TYPE}, {"_Bool", K_TYPE},
    {"bool", K_TYPE}, {"_Complex", K_TYPE}, {"__signed__", K_TYPE}, {"__int128", K_TYPE}, {"size_t", K_TYPE},
    {"ssize_t", K_TYPE}, {"ptrdiff_t", K_TYPE}, {"intptr_t", K_TYPE}, {"uintptr_t", K_TYPE},
    {"charptr_t", K_TYPE}, {"nullptr_t", K_TYPE}, {"max_align_t", K_TYPE}, {"int8_t", K_TYPE},
    {"int16_t", K_TYPE}, {"int32_t", K_TYPE}, {"int64_t", K_TYPE}, {"uint8_t", K_TYPE}, {"uint16_t", K_TYPE},
    {"uint32_t", K_TYPE}, {"uint64_t", K_TYPE}, {"char8_t", K_TYPE}, {"char16_t", K_TYPE},
    {"char32_t", K_TYPE},
    {"struct", K_TAG}, {"union", K_TAG}, {"enum", K_TAG},
    {"typedef", K_TYPEDEF}, {"extern", K_EXTERN},
    {"static", K_QUAL}, {"const", K_QUAL}, {"volatile", K_QUAL}, {"inline", K_QUAL}, {"register", K_QUAL},
    {"auto", K_QUAL}, {"restrict", K_QUAL}, {"__restrict", K_QUAL}, {"__restrict__", K_QUAL},
    {"__inline", K_QUAL}, {"__inline__", K_QUAL}, {"__volatile__", K_QUAL}, {"__volatile", K_QUAL},
    {"__const", K_QUAL}, {"_Noreturn", K_QUAL}, {"noreturn", K_QUAL}, {"_Thread_local", K_QUAL},
    {"thread_local", K_QUAL}, {"__thread", K_QUAL}, {"_Atomic", K_QUAL}, {"__extension__", K_QUAL},
    {"constexpr", K_QUAL}, {"__forceinline", K_QUAL}, {"__cdecl", K_QUAL}, {"__stdcall", K_QUAL},
    {"__fastcall", K_QUAL}, {"__unaligned", K_QUAL},
    {"__attribute__", K_ATTR}, {"__attribute", K_ATTR}, {"__declspec", K_ATTR}, {"_Alignas", K_ATTR},
    {"alignas", K_ATTR}, {"asm", K_ATTR}, {"__asm__", K_ATTR}, {"__asm", K_ATTR},
    {"goto", K_GOTO},
    {"return", K_STMT}, {"if", K_STMT}, {"else", K_STMT}, {"for", K_STMT}, {"while", K_STMT}, {"do", K_STMT},
    {"switch", K_STMT}, {"case", K_STMT}, {"default", K_STMT}, {"break", K_STMT}, {"continue", K_STMT},
    {"sizeof", K_STMT}, {"_Alignof", K_STMT}, {"alignof", K_STMT}, {"__alignof__", K_STMT},
    {"offsetof", K_STMT}, {"_Generic", K_STMT}, {"_Static_assert", K_STMT}, {"static_assert", K_STMT},
    {"NULL", K_STMT}, {"nullptr", K_STMT}, {"true", K_STMT}, {"false", K_STMT}, {"TRUE", K_STMT},
    {"FALSE", K_STMT}, {"typeof", K_STMT}, {"__typeof__", K_STMT}, {"__typeof", K_STMT},
    {"defined", K_DEFINED},
};

#define KEYWORD_SLOTS 512
static int keywords_ready = 0;
static struct {
    const char *word;
    uint8_t length, cls;
    uint32_t hash;
} keyword_table[KEYWORD_SLOTS];

static void keywords_init(void) {
    if (keywords_ready) return;
    keywords_ready = 1;
    for (size_t i = 0; i < sizeof(KEYWORDS) / sizeof(KEYWORDS[0]); i++) {
        size_t n = strlen(KEYWORDS[i].word);
        uint32_t h = hash_bytes((const uint8_t *)KEYWORDS[i].word, (Py_ssize_t)n);
        uint32_t slot = h % KEYWORD_SLOTS;
        while (keyword_table[slot].word != NULL) slot = (slot + 1) % KEYWORD_SLOTS;
        keyword_table[slot].word = KEYWORDS[i].word;
        keyword_table[slot].length = (uint8_t)n;
        keyword_table[slot].cls = KEYWORDS[i].cls;
        keyword_table[slot].hash = h;
    }
}

static uint8_t keyword_class(const uint8_t *p, Py_ssize_t n, uint32_t h) {
    if (n > 20) return K_NONE;
    uint32_t slot = h % KEYWORD_SLOTS;
    while (keyword_table[slot].word != NULL) {
        if (keyword_table[slot].hash == h && keyword_table[slot].length == n &&
            memcmp(keyword_table[slot].word, p, (size_t)n) == 0)
            return keyword_table[slot].cls;
        slot = (slot + 1) % KEYWORD_SLOTS;
    }
    return K_NONE;
}

/* ---- lexer ----------------------------------------------------------------------------------------- */

static int is_ident_start(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80; }
static int is_ident_char(uint8_t c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* An #include's target: s[start:start + length], in <> when `angle`. */
typedef struct {
    uint32_t start, length, line;
    int angle;
} Include;

typedef struct {
    Include *includes;
    Py_ssize_t count, capacity;
} LexOut;

typedef struct {
    const uint8_t *s;
    Py_ssize_t n, i;
    uint32_t line;
    Py_ssize_t line_start;
} Lexer;

static void lex_newline(Lexer *lx) {
    lx->line++;
    lx->line_start = lx->i;
}

/* Skips a block comment starting at lx->i ("/" "*"), counting newlines. */
static void skip_block_comment(Lexer *lx) {
    lx->i += 2;
    while (lx->i < lx->n) {
        uint8_t c = lx->s[lx->i];
        if (c == '*' && lx->i + 1 < lx->n && lx->s[lx->i + 1] == '/') {
            lx->i += 2;
            return;
        }
        lx->i++;
        if (c == '\n') lex_newline(lx);
    }
}

/* Skips a string or character literal opened by `quote` at lx->i; stops at an unescaped newline. */
static void skip_quoted(Lexer *lx, uint8_t quote) {
    lx->i++;
    while (lx->i < lx->n) {
        uint8_t c = lx->s[lx->i];
        if (c == '\\' && lx->i + 1 < lx->n) {
            lx->i += 2;
            if (lx->s[lx->i - 1] == '\n') lex_newline(lx);
            continue;
        }
        if (c == '\n') return;
        lx->i++;
        if (c == quote) return;
    }
}

static int add_include(LexOut *out, Py_ssize_t start, Py_ssize_t n, int angle, uint32_t line) {
    if (out->count == out->capacity) {
        Py_ssize_t capacity = out->capacity ? out->capacity * 2 : 16;
        Include *items = realloc(out->includes, (size_t)capacity * sizeof(Include));
        if (items == NULL) return -1;
        out->includes = items;
        out->capacity = capacity;
    }
    out->includes[out->count++] = (Include){(uint32_t)start, (uint32_t)n, line, angle};
    return 0;
}

/* An #include's target as a str: its bytes decoded with "replace", in <> for an angle include. */
static PyObject *include_target(const uint8_t *s, const Include *inc) {
    PyObject *inner = PyUnicode_DecodeUTF8((const char *)s + inc->start, inc->length, "replace");
    if (inner == NULL || !inc->angle) return inner;
    PyObject *target = PyUnicode_FromFormat("<%U>", inner);
    Py_DECREF(inner);
    return target;
}

/* The includes as scan_c returns them: a list of (target, line). */
static PyObject *includes_list(const uint8_t *s, const LexOut *out) {
    PyObject *list = PyList_New(out->count);
    for (Py_ssize_t k = 0; list != NULL && k < out->count; k++) {
        PyObject *target = include_target(s, &out->includes[k]);
        PyObject *item = target ? Py_BuildValue("(NI)", target, (unsigned int)out->includes[k].line) : NULL;
        if (item == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, k, item);
    }
    return list;
}

static uint8_t directive_kind(const uint8_t *p, Py_ssize_t n) {
#define IS(word) (n == (Py_ssize_t)sizeof(word) - 1 && memcmp(p, word, sizeof(word) - 1) == 0)
    if (IS("define")) return PP_DEFINE;
    if (IS("include") || IS("include_next") || IS("import")) return PP_INCLUDE;
    if (IS("if") || IS("ifdef") || IS("ifndef")) return PP_IF;
    if (IS("else") || IS("elif") || IS("elifdef") || IS("elifndef")) return PP_ELSE;
    if (IS("endif")) return PP_ENDIF;
    return PP_OTHER;
#undef IS
}

static const uint8_t STRUCTURAL[256] = {['('] = 1, [')'] = 1, ['{'] = 1, ['}'] = 1, ['['] = 1, [']'] = 1,
                                        [';'] = 1, [','] = 1, ['='] = 1, ['*'] = 1, [':'] = 1};

static int lex(Lexer *lx, Tokens *tokens, LexOut *out) {
    const uint8_t *s = lx->s;
    int at_line_start = 1, in_pp = 0;
    while (lx->i < lx->n) {
        uint8_t c = s[lx->i];
        if (c == '\n') {
            lx->i++;
            if (in_pp) {
                if (tokens_push(tokens, (uint32_t)lx->i, (uint32_t)lx->i, lx->line + 1, 1, T_PP_END, 0, 1, 0) < 0) return -1;
                in_pp = 0;
            }
            lex_newline(lx);
            at_line_start = 1;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            lx->i++;
            continue;
        }
        if (c == '\\' && lx->i + 1 < lx->n && (s[lx->i + 1] == '\n' || s[lx->i + 1] == '\r')) {
            /* a line continuation: the directive (if any) goes on */
            lx->i++;
            if (s[lx->i] == '\r') lx->i++;
            if (lx->i < lx->n && s[lx->i] == '\n') {
                lx->i++;
                lex_newline(lx);
            }
            continue;
        }
        if (c == '/' && lx->i + 1 < lx->n && s[lx->i + 1] == '*') {
            skip_block_comment(lx);
            continue;
        }
        if (c == '/' && lx->i + 1 < lx->n && s[lx->i + 1] == '/') {
            while (lx->i < lx->n && s[lx->i] != '\n') lx->i++;
            continue;
        }
        uint32_t line = lx->line, col = (uint32_t)(lx->i - lx->line_start + 1);
        Py_ssize_t start = lx->i;
        if (c == '#' && at_line_start && !in_pp) {
            at_line_start = 0;
            lx->i++;
            while (lx->i < lx->n && (s[lx->i] == ' ' || s[lx->i] == '\t')) lx->i++;
            Py_ssize_t name = lx->i;
            while (lx->i < lx->n && is_ident_char(s[lx->i])) lx->i++;
            uint8_t kind = directive_kind(s + name, lx->i - name);
            if (tokens_push(tokens, (uint32_t)start, (uint32_t)lx->i, line, col, T_PP_START, kind, 1, 0) < 0) return -1;
            in_pp = 1;
            if (kind == PP_INCLUDE) {
                while (lx->i < lx->n && (s[lx->i] == ' ' || s[lx->i] == '\t')) lx->i++;
                if (lx->i < lx->n && (s[lx->i] == '"' || s[lx->i] == '<')) {
                    uint8_t close = s[lx->i] == '"' ? '"' : '>';
                    Py_ssize_t from = lx->i + 1, to = from;
                    while (to < lx->n && s[to] != close && s[to] != '\n') to++;
                    if (to < lx->n && s[to] == close && to > from) {
                        if (add_include(out, from, to - from, close == '>', line) < 0) return -1;
                    }
                    lx->i = to < lx->n && s[to] == close ? to + 1 : to;
                }
            }
            continue;
        }
        at_line_start = 0;
        if (is_ident_start(c)) {
            while (lx->i < lx->n && is_ident_char(s[lx->i])) lx->i++;
            Py_ssize_t n = lx->i - start;
            /* L"..", u8"..", U'..': a literal's prefix, not an identifier */
            if (lx->i < lx->n && (s[lx->i] == '"' || s[lx->i] == '\'') && n <= 2 &&
                (s[start] == 'L' || s[start] == 'u' || s[start] == 'U') &&
                (n == 1 || (s[start] == 'u' && s[start + 1] == '8'))) {
                skip_quoted(lx, s[lx->i]);
                if (!in_pp && tokens_push(tokens, (uint32_t)start, (uint32_t)lx->i, line, col, T_LITERAL, 0, 0, 0) < 0)
                    return -1;
                continue;
            }
            uint32_t h = hash_bytes(s + start, n);
            uint8_t cls = keyword_class(s + start, n, h);
            if (tokens_push(tokens, (uint32_t)start, (uint32_t)lx->i, line, col, cls ? T_KEYWORD : T_IDENT, cls, (uint8_t)in_pp, h) < 0) return -1;
            continue;
        }
        if ((c >= '0' && c <= '9') || (c == '.' && lx->i + 1 < lx->n && s[lx->i + 1] >= '0' && s[lx->i + 1] <= '9')) {
            lx->i++;
            while (lx->i < lx->n) {
                uint8_t d = s[lx->i];
                if ((d == '+' || d == '-') && (s[lx->i - 1] == 'e' || s[lx->i - 1] == 'E' || s[lx->i - 1] == 'p' ||
                                               s[lx->i - 1] == 'P')) {
                    lx->i++;
                } else if (is_ident_char(d) || d == '.') {
                    lx->i++;
                } else {
                    break;
                }
            }
            if (!in_pp && tokens_push(tokens, (uint32_t)start, (uint32_t)lx->i, line, col, T_LITERAL, 0, 0, 0) < 0)
                return -1;
            continue;
        }
        if (c == '"' || c == '\'') {
            skip_quoted(lx, c);
            if (!in_pp && tokens_push(tokens, (uint32_t)start, (uint32_t)lx->i, line, col, T_LITERAL, 0, 0, 0) < 0)
                return -1;
            continue;
        }
        lx->i++;
        /* Only the punctuation the statement scanner reads becomes a token (and none inside directives);
           `.`, `->`, operators are read back from the bytes when an occurrence's role is decided. */
        if (!in_pp && STRUCTURAL[c] && tokens_push(tokens, (uint32_t)start, (uint32_t)lx->i, line, col, T_PUNCT, c, 0, 0) < 0)
            return -1;
    }
    if (in_pp) {
        if (tokens_push(tokens, (uint32_t)lx->n, (uint32_t)lx->n, lx->line + 1, 1, T_PP_END, 0, 1, 0) < 0) return -1;
    }
    return 0;
}

/* ---- definitions ----------------------------------------------------------------------------------- */

enum { F_FILE, F_FUNC, F_STRUCT, F_ENUM, F_BLOCK, F_INIT };

typedef struct {
    uint8_t kind;
    uint8_t in_func;   /* inside a function body (labels are possible) */
    int32_t name;      /* token index of the frame's name (function, tag), -1 when anonymous */
    int32_t symbol;    /* index of the frame's definition in the symbol list, -1 when none */
    Py_ssize_t stmt;   /* first token of the current statement (file and struct frames) */
    int32_t paren;     /* open parentheses in the current statement */
    uint8_t assigned;  /* an `=` at parenthesis depth 0 in the current statement */
    Py_ssize_t element; /* enum frames: first token of the current enumerator */
} Frame;

#define MAX_FRAMES 64
#define MAX_CONDITIONALS 32

typedef struct {
    Frame frames[MAX_FRAMES];
    int depth;
} Stack;

typedef struct {
    Stack at_if, after_first;
    Py_ssize_t if_token; /* token index of the #if */
    uint8_t has_else;
} Conditional;

typedef struct {
    int32_t name;  /* token index */
    const char *kind;
    int32_t start, end; /* token indexes of the whole definition (end inclusive; -1 = open) */
    int32_t end_line_override; /* macros end at the start of the next line */
    int32_t twin; /* a definition whose body another #if branch opened and this one's closes, or -1 */
    char container[256];
} Def;

typedef struct {
    Def *items;
    Py_ssize_t count, capacity;
} Defs;

typedef struct {
    const uint8_t *s;
    Tokens *tokens;
    Defs defs;
    Stack stack;
    /* A K&R definition in progress, `int f(a, b) int a; char *b; {`: the name, where it began, and how many
       definitions there were before its parameter declarations (which are not global variables). */
    int32_t kr_name;
    Py_ssize_t kr_start, kr_defs;
} Parser;

static const Token *tok(Parser *p, Py_ssize_t i) { return &p->tokens->items[i]; }

static int is_punct(const Token *t, uint8_t c) { return t->type == T_PUNCT && t->sub == c; }

/* The names of the named frames around, dotted: tree-sitter's containers (function, struct, enum). */
static void container_of(Parser *p, char *out, size_t size) {
    size_t used = 0;
    out[0] = 0;
    for (int d = 0; d < p->stack.depth; d++) {
        const Frame *f = &p->stack.frames[d];
        if (f->name < 0 || (f->kind != F_FUNC && f->kind != F_STRUCT && f->kind != F_ENUM)) continue;
        const Token *t = tok(p, f->name);
        size_t n = t->end - t->start;
        if (used + n + 2 >= size) break;
        if (used) out[used++] = '.';
        memcpy(out + used, p->s + t->start, n);
        used += n;
        out[used] = 0;
    }
}

static int add_def(Parser *p, int32_t name, const char *kind, int32_t start, int32_t end) {
    if (p->defs.count == p->defs.capacity) {
        Py_ssize_t capacity = p->defs.capacity ? p->defs.capacity * 2 : 64;
        Def *items = realloc(p->defs.items, (size_t)capacity * sizeof(Def));
        if (items == NULL) return -1;
        p->defs.items = items;
        p->defs.capacity = capacity;
    }
    Def *d = &p->defs.items[p->defs.count];
    d->name = name;
    d->kind = kind;
    d->start = start;
    d->end = end;
    d->end_line_override = 0;
    d->twin = -1;
    container_of(p, d->container, sizeof(d->container));
    return (int)p->defs.count++;
}

/* The next token at or after i that is not inside a directive line (or `end`). */
static Py_ssize_t next_code(Parser *p, Py_ssize_t i, Py_ssize_t end) {
    while (i < end && tok(p, i)->in_pp) i++;
    return i;
}

/* Index just past the balanced group opened at i (`(`, `[` or `{`), not beyond `end`. */
static Py_ssize_t skip_group(Parser *p, Py_ssize_t i, Py_ssize_t end) {
    int depth = 0;
    for (; i < end; i++) {
        const Token *t = tok(p, i);
        if (t->in_pp || t->type != T_PUNCT) continue;
        if (t->sub == '(' || t->sub == '[' || t->sub == '{') depth++;
        else if (t->sub == ')' || t->sub == ']' || t->sub == '}') {
            if (--depth <= 0) return i + 1;
        }
    }
    return end;
}

static int starts_with_underscores(Parser *p, int32_t i) {
    const Token *t = tok(p, i);
    return t->end - t->start >= 2 && p->s[t->start] == '_' && p->s[t->start + 1] == '_';
}

/* Linux's annotation macros that take arguments and may follow a declarator's name (`int x __aligned(8)`). */
static const char *const ANNOTATIONS[] = {"__aligned", "__section", "__printf", "__scanf", "__acquires",
                                          "__releases", "__must_hold", "__alloc_size", "__cond_acquires",
                                          "__cond_lock", "__assume_aligned", "__counted_by", "__free",
                                          "__cleanup", "__guarded_by", "__pt_guarded_by", "__diag_ignore",
                                          "__nocfi", "__no_sanitize", "__attribute_const__", "__malloc"};

static int is_annotation(Parser *p, int32_t i) {
    const Token *t = tok(p, i);
    size_t n = t->end - t->start;
    for (size_t k = 0; k < sizeof(ANNOTATIONS) / sizeof(ANNOTATIONS[0]); k++) {
        if (strlen(ANNOTATIONS[k]) == n && memcmp(ANNOTATIONS[k], p->s + t->start, n) == 0) return 1;
    }
    return 0;
}

/* A declarator's name inside a parenthesised group that starts with `*` (`(*name)(...)`, `(* const name[])`). */
static int32_t pointer_group_name(Parser *p, Py_ssize_t open, Py_ssize_t close) {
    int32_t name = -1;
    for (Py_ssize_t i = open + 1; i < close; i++) {
        const Token *t = tok(p, i);
        if (t->in_pp) continue;
        if (t->type == T_IDENT) name = (int32_t)i;
        else if (t->type == T_PUNCT && (t->sub == '[' || t->sub == '(' || t->sub == ')')) {
            if (name >= 0) break;
        }
    }
    return name;
}

typedef struct {
    int32_t name;
    uint8_t is_function;     /* the name is followed by a parameter list (prototype or definition) */
    uint8_t identifier_list; /* ... of names only: `f(a, b)`, a K&R definition's head */
} Declarator;

/* Whether the group (open, close) holds only identifiers and commas, and at least one identifier. */
static int only_identifiers(Parser *p, Py_ssize_t open, Py_ssize_t close) {
    int names = 0;
    for (Py_ssize_t i = open + 1; i < close; i++) {
        const Token *t = tok(p, i);
        if (t->in_pp) continue;
        if (t->type == T_IDENT) names++;
        else if (!is_punct(t, ',')) return 0;
    }
    return names > 0;
}

/* The declarators of the statement tokens [b, e): `static struct foo *a, b[3] __read_mostly = {...}`.
   Returns how many were written to `out` (at most `size`). A statement whose first non-specifier word
   is followed by `(` (a macro call such as `DEFINE_MUTEX(lock)`) declares nothing. */
static int declarators(Parser *p, Py_ssize_t b, Py_ssize_t e, Declarator *out, int size, int *is_typedef,
                       int *is_extern) {
    int count = 0, seen_type = 0, closed = 0, dead = 0, after_body = 0;
    int32_t last_plain = -1, first_underscored = -1, pointer_name = -1, last_cand = -1, function_name_token = -1;
    uint8_t is_function = 0, identifier_list = 0;
    *is_typedef = 0;
    *is_extern = 0;
#define FINISH()                                                                                              \
    do {                                                                                                      \
        int32_t chosen = pointer_name >= 0 ? pointer_name                                                     \
                         : is_function    ? function_name_token                                               \
                         : last_plain >= 0 ? last_plain                                                       \
                                           : first_underscored;                                               \
        if (!dead && chosen >= 0 && count < size) {                                                          \
            out[count].name = chosen;                                                                         \
            out[count].is_function = pointer_name >= 0 ? 0 : is_function;                                    \
            out[count].identifier_list = identifier_list;                                                     \
            count++;                                                                                          \
        }                                                                                                     \
        last_plain = first_underscored = pointer_name = last_cand = function_name_token = -1;                 \
        is_function = identifier_list = 0;                                                                    \
        closed = dead = after_body = 0;                                                                       \
    } while (0)
    Py_ssize_t i = b;
    while (i < e) {
        const Token *t = tok(p, i);
        if (t->in_pp) {
            i++;
            continue;
        }
        if (t->type == T_KEYWORD) {
            uint8_t cls = t->sub;
            after_body = 0;
            if (cls == K_TYPEDEF) *is_typedef = 1;
            else if (cls == K_EXTERN) *is_extern = 1;
            else if (cls == K_TYPE) seen_type = 1;
            else if (cls == K_TAG) {
                seen_type = 1;
                Py_ssize_t j = next_code(p, i + 1, e);
                /* struct __attribute__((packed)) name */
                while (j < e && tok(p, j)->type == T_KEYWORD && tok(p, j)->sub == K_ATTR) {
                    j = next_code(p, j + 1, e);
                    if (j < e && is_punct(tok(p, j), '(')) j = skip_group(p, j, e);
                    j = next_code(p, j, e);
                }
                if (j < e && tok(p, j)->type == T_IDENT) j = next_code(p, j + 1, e);
                if (j < e && is_punct(tok(p, j), '{')) {
                    j = skip_group(p, j, e);
                    after_body = 1;
                }
                i = j;
                continue;
            } else if (cls == K_ATTR) {
                Py_ssize_t j = next_code(p, i + 1, e);
                i = j < e && is_punct(tok(p, j), '(') ? skip_group(p, j, e) : j;
                continue;
            } else if (cls == K_STMT || cls == K_GOTO) {
                dead = 1;
            }
            i++;
            continue;
        }
        if (t->type == T_IDENT) {
            Py_ssize_t j = next_code(p, i + 1, e);
            int followed_by_paren = j < e && is_punct(tok(p, j), '(');
            if (!seen_type) {
                seen_type = 1; /* a type name (typedef) or an annotation macro before the type */
                Py_ssize_t inside = followed_by_paren ? next_code(p, j + 1, e) : e;
                if (followed_by_paren && !(inside < e && is_punct(tok(p, inside), '*'))) {
                    /* `__printf(1, 2) void f(...)`, or a macro call: `DEFINE_MUTEX(x);` declares nothing, and
                       `NOKPROBE_SYMBOL(f)` without its `;` before `static int g(...)` is not part of g's
                       declaration. Not `type (*name)(...)`. */
                    seen_type = 0;
                    i = skip_group(p, j, e);
                    continue;
                }
            } else if (!closed) {
                if (after_body && starts_with_underscores(p, (int32_t)i)) {
                    /* `} __packed;`, `} __randomize_layout;`: annotations of the struct, not names */
                    if (followed_by_paren) {
                        i = skip_group(p, j, e);
                        continue;
                    }
                } else if (followed_by_paren && last_cand >= 0 && is_annotation(p, (int32_t)i)) {
                    /* `int x __aligned(8)`, `void f(void) __acquires(lock)` */
                    i = skip_group(p, j, e);
                    continue;
                } else {
                    last_cand = (int32_t)i;
                    if (starts_with_underscores(p, (int32_t)i)) {
                        if (first_underscored < 0) first_underscored = (int32_t)i;
                    } else {
                        last_plain = (int32_t)i;
                    }
                    if (followed_by_paren) {
                        is_function = 1;
                        function_name_token = (int32_t)i;
                        closed = 1;
                        i = skip_group(p, j, e);
                        identifier_list = (uint8_t)only_identifiers(p, j, i - 1);
                        continue;
                    }
                }
            }
            after_body = 0;
            i++;
            continue;
        }
        after_body = 0;
        if (t->type == T_PUNCT) {
            switch (t->sub) {
            case '*':
                seen_type = 1;
                first_underscored = -1;
                i++;
                continue;
            case '(': {
                Py_ssize_t close = skip_group(p, i, e);
                Py_ssize_t first = next_code(p, i + 1, e);
                if (!closed && first < e && is_punct(tok(p, first), '*')) {
                    int32_t name = pointer_group_name(p, i, close - 1);
                    if (name >= 0) {
                        pointer_name = name;
                        closed = 1;
                    }
                }
                i = close;
                continue;
            }
            case '[':
                closed = 1;
                i = skip_group(p, i, e);
                continue;
            case '{':
                i = skip_group(p, i, e);
                continue;
            case ':':
                closed = 1;
                i++;
                continue;
            case '=': {
                closed = 1;
                /* the initializer, up to the next top-level comma */
                Py_ssize_t j = i + 1;
                while (j < e) {
                    const Token *u = tok(p, j);
                    if (!u->in_pp && u->type == T_PUNCT) {
                        if (u->sub == '(' || u->sub == '[' || u->sub == '{') {
                            j = skip_group(p, j, e);
                            continue;
                        }
                        if (u->sub == ',') break;
                    }
                    j++;
                }
                i = j;
                continue;
            }
            case ',':
                FINISH();
                i++;
                continue;
            default:
                i++;
                continue;
            }
        }
        i++;
    }
    FINISH();
#undef FINISH
    return count;
}

/* `{` in a file frame: the function being defined by statement [b, e), or -1. */
static int32_t function_name(Parser *p, Py_ssize_t b, Py_ssize_t e) {
    Declarator found[4];
    int is_typedef, is_extern;
    int n = declarators(p, b, e, found, 4, &is_typedef, &is_extern);
    if (is_typedef) return -1;
    for (int k = 0; k < n; k++) {
        if (found[k].is_function) return found[k].name;
    }
    return -1;
}

static int declaration(Parser *p, Py_ssize_t b, Py_ssize_t e, int in_struct) {
    Declarator found[64];
    int is_typedef, is_extern;
    int n = declarators(p, b, e, found, 64, &is_typedef, &is_extern);
    if (is_extern && !is_typedef) return 0;
    Py_ssize_t first = next_code(p, b, e);
    if (!in_struct && !is_typedef && n == 1 && found[0].is_function && found[0].identifier_list) {
        p->kr_name = found[0].name;
        p->kr_start = first;
        p->kr_defs = p->defs.count;
        return 0;
    }
    for (int k = 0; k < n; k++) {
        const char *kind;
        if (is_typedef) kind = "type alias";
        else if (found[k].is_function) continue; /* a prototype: not a definition */
        else kind = in_struct ? "field" : "variable";
        if (add_def(p, found[k].name, kind, (int32_t)first, (int32_t)e) < 0) return -1;
    }
    return 0;
}

static Frame *top(Parser *p) { return &p->stack.frames[p->stack.depth - 1]; }

static void push(Parser *p, uint8_t kind, int32_t name, int32_t symbol, Py_ssize_t next) {
    Frame *parent = top(p);
    if (p->stack.depth >= MAX_FRAMES) return;
    Frame *f = &p->stack.frames[p->stack.depth++];
    f->kind = kind;
    f->in_func = parent->in_func || kind == F_FUNC;
    f->name = name;
    f->symbol = symbol;
    f->stmt = next;
    f->paren = 0;
    f->assigned = 0;
    f->element = next;
}

/* The enumerator of tokens [b, e) in an enum body. */
static int enumerator(Parser *p, Py_ssize_t b, Py_ssize_t e) {
    Py_ssize_t first = next_code(p, b, e);
    if (first >= e || tok(p, first)->type != T_IDENT) return 0;
    Py_ssize_t last = first;
    for (Py_ssize_t i = first; i < e; i++) {
        if (!tok(p, i)->in_pp) last = i;
    }
    return add_def(p, (int32_t)first, "constant", (int32_t)first, (int32_t)last) < 0 ? -1 : 0;
}

/* `{` at i in a file or struct frame whose statement began at b: struct/union/enum body, function body,
   initializer or something else. */
static int open_brace(Parser *p, Py_ssize_t i) {
    Frame *f = top(p);
    Py_ssize_t b = f->stmt;
    /* look back for `struct [attributes] [name] {` */
    Py_ssize_t j = i - 1;
    while (j >= b && tok(p, j)->in_pp) j--;
    int32_t tag_name = -1;
    if (j >= b && tok(p, j)->type == T_IDENT) {
        tag_name = (int32_t)j;
        j--;
        while (j >= b && tok(p, j)->in_pp) j--;
    }
    /* skip `__attribute__((...))` between the keyword and the name */
    while (j >= b && is_punct(tok(p, j), ')')) {
        int depth = 0;
        for (; j >= b; j--) {
            const Token *t = tok(p, j);
            if (t->in_pp) continue;
            if (is_punct(t, ')')) depth++;
            else if (is_punct(t, '(') && --depth == 0) break;
        }
        j--;
        while (j >= b && tok(p, j)->in_pp) j--;
        if (j >= b && tok(p, j)->type == T_KEYWORD && tok(p, j)->sub == K_ATTR) j--;
        while (j >= b && tok(p, j)->in_pp) j--;
    }
    if (j >= b && tok(p, j)->type == T_KEYWORD && tok(p, j)->sub == K_TAG && f->paren == 0 && !f->assigned) {
        const Token *kw = tok(p, j);
        int is_enum = p->s[kw->start] == 'e';
        int symbol = -1;
        if (tag_name >= 0) {
            symbol = add_def(p, tag_name, is_enum ? "enum" : "struct", (int32_t)j, -1);
            if (symbol < 0) return -1;
        }
        push(p, is_enum ? F_ENUM : F_STRUCT, tag_name, symbol, i + 1);
        return 0;
    }
    if (f->paren > 0 || f->assigned || (f->kind != F_FILE && f->kind != F_STRUCT)) {
        push(p, f->kind == F_FUNC || f->kind == F_BLOCK ? F_BLOCK : F_INIT, -1, -1, i + 1);
        return 0;
    }
    if (f->kind == F_FILE) {
        /* extern "C" { */
        Py_ssize_t k = i - 1;
        while (k >= b && tok(p, k)->in_pp) k--;
        if (k >= b && tok(p, k)->type == T_LITERAL) {
            push(p, F_FILE, -1, -1, i + 1);
            return 0;
        }
        /* bounded look-back: a statement of thousands of tokens without `;` is macro soup, not a signature */
        int32_t name = function_name(p, i - b > 4096 ? i - 4096 : b, i);
        Py_ssize_t start = next_code(p, b, i);
        if (name < 0 && p->kr_name >= 0 && start == i) {
            /* `{` right after a K&R head's parameter declarations: those were parameters, not globals */
            name = p->kr_name;
            start = p->kr_start;
            p->defs.count = p->kr_defs;
        }
        p->kr_name = -1;
        int symbol = -1;
        if (name >= 0) {
            symbol = add_def(p, name, "function", (int32_t)start, -1);
            if (symbol < 0) return -1;
        }
        push(p, F_FUNC, name, symbol, i + 1);
        return 0;
    }
    push(p, F_BLOCK, -1, -1, i + 1);
    return 0;
}

static int close_brace(Parser *p, Py_ssize_t i) {
    if (p->stack.depth <= 1) return 0; /* unbalanced: stay at file scope */
    Frame *f = top(p);
    if (f->kind == F_ENUM && enumerator(p, f->element, i) < 0) return -1;
    if (f->symbol >= 0) p->defs.items[f->symbol].end = (int32_t)i;
    uint8_t kind = f->kind;
    p->stack.depth--;
    Frame *parent = top(p);
    if (kind == F_FUNC || (kind == F_FILE && parent->kind == F_FILE) || kind == F_BLOCK) {
        parent->stmt = i + 1;
        parent->paren = 0;
        parent->assigned = 0;
    }
    return 0;
}

static void restart_statement(Frame *f, Py_ssize_t next) {
    f->stmt = next;
    f->element = next;
    f->paren = 0;
    f->assigned = 0;
}

/* `#if  void f(int a) {  #else  void f(void) {  #endif  body }`: the second definition's body is the one the
   first branch's frame closes, so it ends where the first one does. */
static void link_twins(Parser *p, const Stack *kept) {
    for (int d = 0; d < p->stack.depth && d < kept->depth; d++) {
        int32_t dropped = p->stack.frames[d].symbol, survivor = kept->frames[d].symbol;
        if (dropped >= 0 && survivor >= 0 && dropped != survivor && p->defs.items[dropped].end < 0)
            p->defs.items[dropped].twin = survivor;
    }
}

/* Whether the frame finished a statement (or an enumerator) after token `since`. */
static int progressed(const Frame *f, Py_ssize_t since) {
    return f->stmt > since || (f->kind == F_ENUM && f->element > since);
}

static int parse(Parser *p) {
    Tokens *tokens = p->tokens;
    Conditional *conds = NULL;
    int cond_depth = 0;
    int rc = 0;
    p->stack.depth = 1;
    p->kr_name = -1;
    Frame *file = &p->stack.frames[0];
    memset(file, 0, sizeof(*file));
    file->kind = F_FILE;
    file->name = file->symbol = -1;
    for (Py_ssize_t i = 0; i < tokens->count; i++) {
        const Token *t = tok(p, i);
        if (t->type == T_PP_START) {
            if (t->sub == PP_DEFINE) {
                Py_ssize_t name = i + 1, end = i + 1;
                while (end < tokens->count && tok(p, end)->type != T_PP_END) end++;
                if (name < end && (tok(p, name)->type == T_IDENT || tok(p, name)->type == T_KEYWORD)) {
                    int symbol = add_def(p, (int32_t)name, "macro", (int32_t)i, (int32_t)end);
                    if (symbol < 0) return -1;
                    p->defs.items[symbol].end_line_override = 1;
                }
            } else if (t->sub == PP_IF) {
                if (cond_depth < MAX_CONDITIONALS) {
                    if (conds == NULL && (conds = calloc(MAX_CONDITIONALS, sizeof(Conditional))) == NULL) return -1;
                    conds[cond_depth].at_if = p->stack;
                    conds[cond_depth].if_token = i;
                    conds[cond_depth].has_else = 0;
                }
                cond_depth++;
            } else if (t->sub == PP_ELSE) {
                if (cond_depth > 0 && cond_depth <= MAX_CONDITIONALS) {
                    Conditional *c = &conds[cond_depth - 1];
                    if (!c->has_else) c->after_first = p->stack;
                    c->has_else = 1;
                    /* A statement the first branch completed does not go on into this one. */
                    int completed = progressed(top(p), c->if_token);
                    p->stack = c->at_if;
                    if (completed) restart_statement(top(p), i + 1);
                }
            } else if (t->sub == PP_ENDIF) {
                if (cond_depth > 0) {
                    cond_depth--;
                    if (cond_depth < MAX_CONDITIONALS && conds[cond_depth].has_else) {
                        /* A statement completed in any branch does not go on after the #endif. */
                        int completed = progressed(top(p), conds[cond_depth].if_token);
                        link_twins(p, &conds[cond_depth].after_first);
                        p->stack = conds[cond_depth].after_first;
                        if (completed || progressed(top(p), conds[cond_depth].if_token)) restart_statement(top(p), i + 1);
                    }
                }
            }
            continue;
        }
        if (t->in_pp || t->type != T_PUNCT) continue;
        Frame *f = top(p);
        switch (t->sub) {
        case '(':
            f->paren++;
            break;
        case ')':
            if (f->paren > 0) f->paren--;
            break;
        case '=':
            if (f->paren == 0) f->assigned = 1;
            break;
        case '{':
            rc = open_brace(p, i);
            break;
        case '}':
            rc = close_brace(p, i);
            break;
        case ';':
            if (f->paren == 0 && (f->kind == F_FILE || f->kind == F_STRUCT)) {
                rc = declaration(p, f->stmt, i, f->kind == F_STRUCT);
                f->stmt = i + 1;
                f->assigned = 0;
            } else if (f->paren == 0) {
                /* a typedef inside a function: tree-sitter's queries find those too */
                Py_ssize_t first = next_code(p, f->stmt, i);
                if ((f->kind == F_FUNC || f->kind == F_BLOCK) && first < i && tok(p, first)->type == T_KEYWORD &&
                    tok(p, first)->sub == K_TYPEDEF)
                    rc = declaration(p, f->stmt, i, 0);
                f->stmt = i + 1;
                f->assigned = 0;
            }
            break;
        case ',':
            if (f->kind == F_ENUM && f->paren == 0) {
                rc = enumerator(p, f->element, i);
                f->element = i + 1;
            }
            break;
        default:
            break;
        }
        if (rc < 0) break;
    }
    free(conds);
    return rc;
}

/* ---- occurrences, grouped by name ------------------------------------------------------------------ */

typedef struct {
    uint32_t start, length, hash;
    char *positions;
    Py_ssize_t used, capacity;
    /* positions with a role other than d; definitions of this name in the file (their name tokens) */
    uint32_t others, defs;
} Group;

typedef struct {
    Group *groups;
    Py_ssize_t count, capacity;
    int32_t *slots; /* open addressing: group index + 1, 0 = empty */
    Py_ssize_t slot_count;
} Groups;

static int groups_grow(Groups *g) {
    Py_ssize_t slot_count = g->slot_count ? g->slot_count * 2 : 1024;
    int32_t *slots = calloc((size_t)slot_count, sizeof(int32_t));
    if (slots == NULL) return -1;
    for (Py_ssize_t k = 0; k < g->count; k++) {
        Py_ssize_t at = g->groups[k].hash & (slot_count - 1);
        while (slots[at]) at = (at + 1) & (slot_count - 1);
        slots[at] = (int32_t)(k + 1);
    }
    free(g->slots);
    g->slots = slots;
    g->slot_count = slot_count;
    return 0;
}

static Group *group_for(Groups *g, const uint8_t *s, const Token *t) {
    if (2 * (g->count + 1) > g->slot_count && groups_grow(g) < 0) return NULL;
    uint32_t length = t->end - t->start;
    Py_ssize_t at = t->hash & (g->slot_count - 1);
    while (g->slots[at]) {
        Group *found = &g->groups[g->slots[at] - 1];
        if (found->hash == t->hash && found->length == length && memcmp(s + found->start, s + t->start, length) == 0)
            return found;
        at = (at + 1) & (g->slot_count - 1);
    }
    if (g->count == g->capacity) {
        Py_ssize_t capacity = g->capacity ? g->capacity * 2 : 256;
        Group *groups = realloc(g->groups, (size_t)capacity * sizeof(Group));
        if (groups == NULL) return NULL;
        g->groups = groups;
        g->capacity = capacity;
    }
    Group *fresh = &g->groups[g->count++];
    fresh->start = t->start;
    fresh->length = length;
    fresh->hash = t->hash;
    fresh->positions = NULL;
    fresh->used = fresh->capacity = 0;
    fresh->others = fresh->defs = 0;
    g->slots[at] = (int32_t)g->count;
    return fresh;
}

/* Writes `value` in decimal at `out` (no terminator); returns the end. snprintf costs several times more. */
static char *put_uint(char *out, uint32_t value) {
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    while (n) *out++ = digits[--n];
    return out;
}

static int group_add(Group *group, uint32_t line, uint32_t col, char role) {
    if (group->capacity - group->used < 32) {
        Py_ssize_t capacity = group->capacity ? group->capacity * 2 : 64;
        char *positions = realloc(group->positions, (size_t)capacity);
        if (positions == NULL) return -1;
        group->positions = positions;
        group->capacity = capacity;
    }
    char *out = group->positions + group->used;
    if (group->used) *out++ = ';';
    out = put_uint(out, line);
    *out++ = ':';
    out = put_uint(out, col);
    *out++ = ':';
    *out++ = role;
    group->used = out - group->positions;
    return 0;
}

/* ---- positions, packed as codenav's `occurrences` table stores them (codenav/store.py, format 4) -------- */

/* Per occurrence: the line as a zigzag varint of its difference from the previous occurrence's line (the first's
   from 0), then (column << 2 | role) as a varint, roles d 0, r 1, m 2, i 3. About 2.5 bytes an occurrence where
   "line:col:role;" took 9 (the positions were most of the index). */
static const char ROLE_LETTERS[4] = {'d', 'r', 'm', 'i'};

static int role_code(char role) {
    switch (role) {
    case 'd': return 0;
    case 'r': return 1;
    case 'm': return 2;
    case 'i': return 3;
    default: return -1;
    }
}

static uint8_t *put_varint(uint8_t *out, uint64_t value) {
    while (value >= 0x80) {
        *out++ = (uint8_t)(value | 0x80);
        value >>= 7;
    }
    *out++ = (uint8_t)value;
    return out;
}

/* The packed size bound of a text of n bytes: an occurrence ("1:1:r", at least 5 bytes and a separator) packs
   into at most 10 bytes (two varints of up to 35 bits). */
static Py_ssize_t packed_bound(Py_ssize_t n) { return 2 * n + 16; }

/* Packs "line:col:role;..." (n bytes) into out (packed_bound(n) bytes); returns the packed length, or -1 when
   the text is not in that form. */
static Py_ssize_t pack_text(const char *text, Py_ssize_t n, uint8_t *out) {
    uint8_t *at = out;
    int64_t previous = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        uint64_t numbers[2];
        for (int k = 0; k < 2; k++) {
            uint64_t value = 0;
            Py_ssize_t first = i;
            while (i < n && text[i] >= '0' && text[i] <= '9' && i - first < 10) value = value * 10 + (uint64_t)(text[i++] - '0');
            if (i == first || i >= n || text[i] != ':' || value > 0xFFFFFFFFu) return -1;
            i++;
            numbers[k] = value;
        }
        int role = i < n ? role_code(text[i]) : -1;
        if (role < 0) return -1;
        i++;
        if (i < n && text[i++] != ';') return -1;
        if (i == n && text[n - 1] == ';') return -1;
        int64_t delta = (int64_t)numbers[0] - previous;
        previous = (int64_t)numbers[0];
        at = put_varint(at, delta >= 0 ? (uint64_t)delta << 1 : ((uint64_t)(-delta) << 1) - 1);
        at = put_varint(at, numbers[1] << 2 | (uint64_t)role);
    }
    return at - out;
}

static int get_varint(const uint8_t *s, Py_ssize_t n, Py_ssize_t *at, uint64_t *value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*at >= n) return -1;
        uint8_t byte = s[(*at)++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *value = result;
            return 0;
        }
    }
    return -1;
}

/* pack_positions(text) -> bytes: "line:col:role;..." packed (ValueError when it is not in that form). */
static PyObject *pack_positions(PyObject *self, PyObject *args) {
    (void)self;
    const char *text;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "s#", &text, &n)) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, packed_bound(n));
    if (out == NULL) return NULL;
    Py_ssize_t size = pack_text(text, n, (uint8_t *)PyBytes_AS_STRING(out));
    if (size < 0) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_ValueError, "positions: not line:col:role;...");
        return NULL;
    }
    if (_PyBytes_Resize(&out, size) < 0) return NULL;
    return out;
}

/* unpack_positions(packed) -> [(line, col, role), ...] in the packed order (ValueError when truncated). */
static PyObject *unpack_positions(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    const uint8_t *s = view.buf;
    Py_ssize_t n = view.len, at = 0;
    int64_t line = 0;
    PyObject *roles[4] = {NULL, NULL, NULL, NULL};
    PyObject *out = PyList_New(0);
    for (int k = 0; k < 4 && out != NULL; k++) {
        roles[k] = PyUnicode_FromStringAndSize(&ROLE_LETTERS[k], 1);
        if (roles[k] == NULL) Py_CLEAR(out);
    }
    while (out != NULL && at < n) {
        uint64_t zigzag, packed;
        if (get_varint(s, n, &at, &zigzag) < 0 || get_varint(s, n, &at, &packed) < 0) {
            PyErr_SetString(PyExc_ValueError, "positions: truncated");
            Py_CLEAR(out);
            break;
        }
        line += zigzag & 1 ? -(int64_t)((zigzag + 1) >> 1) : (int64_t)(zigzag >> 1);
        PyObject *item = Py_BuildValue("(LKO)", (long long)line, (unsigned long long)(packed >> 2), roles[packed & 3]);
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(item);
    }
    for (int k = 0; k < 4; k++) Py_XDECREF(roles[k]);
    PyBuffer_Release(&view);
    return out;
}

static void groups_free(Groups *g) {
    for (Py_ssize_t k = 0; k < g->count; k++) free(g->groups[k].positions);
    free(g->groups);
    free(g->slots);
}

/* How many positions a group holds (one more than its separators). */
static uint32_t count_positions(const Group *g) {
    if (!g->used) return 0;
    uint32_t n = 1;
    for (Py_ssize_t k = 0; k < g->used; k++) n += g->positions[k] == ';';
    return n;
}

static int ascii(const uint8_t *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] >= 0x80) return 0;
    }
    return 1;
}

/* Token indexes that are not counted as identifier occurrences: goto labels and label definitions. */
static int is_label(Parser *p, Py_ssize_t i, const uint8_t *in_func) {
    if (!in_func[i]) return 0;
    Py_ssize_t before = i - 1;
    while (before >= 0 && tok(p, before)->in_pp) before--;
    if (before >= 0 && tok(p, before)->type == T_KEYWORD && tok(p, before)->sub == K_GOTO) return 1;
    Py_ssize_t after = i + 1;
    while (after < p->tokens->count && tok(p, after)->in_pp) after++;
    if (after >= p->tokens->count || !is_punct(tok(p, after), ':')) return 0;
    if (after + 1 < p->tokens->count && is_punct(tok(p, after + 1), ':')) return 0;
    if (before < 0) return 0;
    const Token *b = tok(p, before);
    return is_punct(b, ';') || is_punct(b, '{') || is_punct(b, '}') || (is_punct(b, ':') && before > 0);
}

/* ---- the module function --------------------------------------------------------------------------- */

static PyObject *decode(const uint8_t *s, Py_ssize_t n) { return PyUnicode_DecodeUTF8((const char *)s, n, "replace"); }

/* [A-Z][A-Z0-9_]+ */
static int all_caps(const uint8_t *s, Py_ssize_t n) {
    if (n < 2 || !(s[0] >= 'A' && s[0] <= 'Z')) return 0;
    for (Py_ssize_t i = 1; i < n; i++) {
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return 0;
    }
    return 1;
}

/* One row of the `symbols` table: name, kind, container, then line, column, end line, end column of the name and
   of the whole definition. */
typedef struct {
    const uint8_t *name;
    Py_ssize_t name_length;
    const char *kind;
    const char *container;
    uint32_t at[8];
} SymbolFields;

static void symbol_fields(Parser *p, Py_ssize_t k, SymbolFields *f) {
    const Def *d = &p->defs.items[k];
    const Token *name = tok(p, d->name);
    const Token *start = tok(p, d->start);
    uint32_t end_line, end_col;
    if (d->end_line_override) {
        const Token *end = tok(p, d->end);
        end_line = end->line;
        end_col = 1;
    } else if (d->end >= 0 || (d->twin >= 0 && p->defs.items[d->twin].end >= 0)) {
        const Token *end = tok(p, d->end >= 0 ? d->end : p->defs.items[d->twin].end);
        end_line = end->line;
        end_col = end->col + (end->end - end->start);
    } else {
        /* never closed (truncated file): up to the end of the name */
        end_line = name->line;
        end_col = name->col + (name->end - name->start);
    }
    f->name = p->s + name->start;
    f->name_length = name->end - name->start;
    f->kind = d->kind;
    /* As codenav/extract.py's _with_containers does for tree-sitter: an all-caps top-level variable is a
       constant. */
    if (strcmp(f->kind, "variable") == 0 && d->container[0] == 0 && all_caps(f->name, f->name_length)) f->kind = "constant";
    f->container = d->container;
    uint32_t values[8] = {name->line, name->col, name->line, name->col + (name->end - name->start), start->line,
                          start->col, end_line, end_col};
    memcpy(f->at, values, sizeof(values));
}

static PyObject *symbols_list(Parser *p, Py_ssize_t file_id) {
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    for (Py_ssize_t k = 0; k < p->defs.count; k++) {
        SymbolFields f;
        symbol_fields(p, k, &f);
        const uint32_t *a = f.at;
        PyObject *item = file_id >= 0 ? Py_BuildValue("(nNsNIIIIIIII)", file_id, decode(f.name, f.name_length), f.kind,
                                                      decode((const uint8_t *)f.container, (Py_ssize_t)strlen(f.container)),
                                                      a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7])
                                      : Py_BuildValue("(NsNIIIIIIII)", decode(f.name, f.name_length), f.kind,
                                                      decode((const uint8_t *)f.container, (Py_ssize_t)strlen(f.container)),
                                                      a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    return list;
}

static int def_start_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Every identifier occurrence grouped by name, in the order names first appear, with each group's count of
   definitions (a name defined and never counted as an occurrence gets a group without positions, at the end).
   Returns -1 (no exception set) when out of memory. */
static int build_groups(Parser *p, Groups *groups) {
    Tokens *tokens = p->tokens;
    const uint8_t *s = p->s;
    int rc = -1;
    uint32_t *def_starts = malloc((size_t)(p->defs.count + 1) * sizeof(uint32_t));
    uint8_t *in_func = calloc((size_t)tokens->count + 1, 1);
    if (def_starts == NULL || in_func == NULL) goto done;
    for (Py_ssize_t k = 0; k < p->defs.count; k++) def_starts[k] = tok(p, p->defs.items[k].name)->start;
    qsort(def_starts, (size_t)p->defs.count, sizeof(uint32_t), def_start_cmp);
    /* which tokens are inside function bodies: by brace depth from each function definition */
    for (Py_ssize_t k = 0; k < p->defs.count; k++) {
        const Def *d = &p->defs.items[k];
        if (strcmp(d->kind, "function") != 0) continue;
        Py_ssize_t last = d->end >= 0 ? d->end : tokens->count - 1;
        for (Py_ssize_t i = d->start; i <= last; i++) in_func[i] = 1;
    }
    int include = 0;
    for (Py_ssize_t i = 0; i < tokens->count; i++) {
        const Token *t = &tokens->items[i];
        if (t->type == T_PP_START) {
            include = t->sub == PP_INCLUDE;
            continue;
        }
        if (t->type == T_PP_END) {
            include = 0;
            continue;
        }
        if (t->type != T_IDENT) continue;
        if (is_label(p, i, in_func)) continue;
        char role;
        /* binary search: is this token a definition's name? */
        Py_ssize_t lo = 0, hi = p->defs.count;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (def_starts[mid] < t->start) lo = mid + 1;
            else hi = mid;
        }
        if (lo < p->defs.count && def_starts[lo] == t->start) role = 'd';
        else if (include) role = 'i';
        else if (t->start && (s[t->start - 1] == '.' || s[t->start - 1] == '>' || s[t->start - 1] == ':')) role = 'm';
        else role = 'r';
        Group *g = group_for(groups, s, t);
        if (g == NULL || group_add(g, t->line, t->col, role) < 0) goto done;
        g->others += role != 'd';
    }
    for (Py_ssize_t k = 0; k < p->defs.count; k++) {
        Group *g = group_for(groups, s, tok(p, p->defs.items[k].name));
        if (g == NULL) goto done;
        g->defs++;
    }
    rc = 0;
done:
    free(def_starts);
    free(in_func);
    return rc;
}

/* Whether a group has no row in the index's `occurrences` table (codenav/store.py): its occurrences are exactly
   its definitions, which the reader takes from `symbols`. Only for ASCII names: two names whose invalid UTF-8
   decodes alike would share a row name and not a group. (A defined name without any occurrence keeps an empty
   row, so that the reader does not make one up.) */
static int group_elided(const Group *g, const uint8_t *s) {
    return g->used && !g->others && g->defs == count_positions(g) && ascii(s + g->start, g->length);
}

/* The occurrence rows of scan_c from the groups build_groups made. */
static PyObject *occurrence_rows(Parser *p, const Groups *groups, Py_ssize_t file_id) {
    const uint8_t *s = p->s;
    PyObject *rows = PyList_New(0);
    if (rows == NULL) goto done;
    for (Py_ssize_t k = 0; k < groups->count; k++) {
        const Group *g = &groups->groups[k];
        PyObject *item;
        if (file_id >= 0) {
            /* the table's rows */
            if (group_elided(g, s)) continue;
            uint8_t *packed = malloc((size_t)packed_bound(g->used));
            if (packed == NULL) {
                PyErr_NoMemory();
                Py_CLEAR(rows);
                goto done;
            }
            Py_ssize_t size = g->used ? pack_text(g->positions, g->used, packed) : 0;
            item = Py_BuildValue("(Nny#)", decode(s + g->start, g->length), file_id, (const char *)packed, size);
            free(packed);
        } else {
            if (!g->used) continue;
            item = Py_BuildValue("(Ns#)", decode(s + g->start, g->length), g->positions, g->used);
        }
        if (item == NULL || PyList_Append(rows, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(rows);
            goto done;
        }
        Py_DECREF(item);
    }
done:
    return rows;
}

/* One C file lexed and parsed: what scan_c and Writer.scan both turn into rows. */
typedef struct {
    LexOut out;
    Tokens tokens;
    Parser parser;
} Scanned;

/* Lex and parse `view` into `sc` (zeroed by the caller, and not moved after: the parser points at its tokens),
   without the GIL; -1 (no exception set) when out of memory. scanned_free(sc) releases it either way. */
static int scan_buffer(const Py_buffer *view, Scanned *sc) {
    Lexer lx = {(const uint8_t *)view->buf, view->len, 0, 1, 0};
    if (lex(&lx, &sc->tokens, &sc->out) < 0) return -1;
    sc->parser.s = (const uint8_t *)view->buf;
    sc->parser.tokens = &sc->tokens;
    return parse(&sc->parser) < 0 ? -1 : 0;
}

static int check_size(const Py_buffer *view, const char *who) {
    if (view->len < (Py_ssize_t)UINT32_MAX / 2) return 0;
    PyErr_Format(PyExc_ValueError, "%s: input over 2 GB", who);
    return -1;
}

static void scanned_free(Scanned *sc) {
    free(sc->out.includes);
    free(sc->tokens.items);
    free(sc->parser.defs.items);
}

static PyObject *scan_c(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t file_id = -1;
    if (!PyArg_ParseTuple(args, "y*|n", &view, &file_id)) return NULL;
    PyObject *result = NULL, *symbols = NULL, *rows = NULL, *includes = NULL;
    Scanned sc = {0};
    Groups groups = {0};
    if (check_size(&view, "scan_c") < 0) goto done;
    int rc;
    if (view.len >= RELEASE_BYTES) {
        Py_BEGIN_ALLOW_THREADS;
        rc = scan_buffer(&view, &sc);
        if (rc == 0) rc = build_groups(&sc.parser, &groups);
        Py_END_ALLOW_THREADS;
    } else {
        rc = scan_buffer(&view, &sc);
        if (rc == 0) rc = build_groups(&sc.parser, &groups);
    }
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if ((symbols = symbols_list(&sc.parser, file_id)) == NULL ||
        (rows = occurrence_rows(&sc.parser, &groups, file_id)) == NULL ||
        (includes = includes_list(view.buf, &sc.out)) == NULL)
        goto done;
    result = PyTuple_Pack(3, symbols, rows, includes);
done:
    Py_XDECREF(symbols);
    Py_XDECREF(rows);
    Py_XDECREF(includes);
    groups_free(&groups);
    scanned_free(&sc);
    PyBuffer_Release(&view);
    return result;
}

/* ---- the index writer ---------------------------------------------------------------------------- */

/* Writer(path): a connection of its own to the index file being built (codenav/store.py's `_Writer` made its
   tables); scan(data, file_id) scans a C file like scan_c and inserts its rows into `symbols` and
   `occurrences` directly, returning only the #includes. The rows never become Python objects: building them
   and binding them one by one through the sqlite3 module cost over half of the whole symbol build on the Linux
   tree. The caller brackets scans with begin() and commit(), and writes nothing through its own connection
   meanwhile (one writer at a time; nothing here waits for a lock). */

typedef struct {
    PyObject_HEAD
    sqlite3 *db;
    sqlite3_stmt *symbol, *occurrence, *import;
    uint8_t *packed; /* the positions of the occurrence row being inserted, packed */
    Py_ssize_t packed_capacity;
    int busy; /* a call runs, maybe without the GIL: the connection and its statements are its own until it ends */
} Writer;

static PyObject *sqlite_error(sqlite3 *db, const char *what) {
    PyErr_Format(PyExc_RuntimeError, "codenav index writer: %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
    return NULL;
}

/* A call's hold on the writer (with the GIL): another thread's call while it runs without the GIL would use the
   same connection and statements (SQLite would serialize the calls, but a scan's rows are bound step by step). */
static int writer_enter(Writer *w, const char *name) {
    if (w->busy) {
        PyErr_Format(PyExc_RuntimeError, "codenav index writer: %s called while another call of the writer runs", name);
        return -1;
    }
    w->busy = 1;
    return 0;
}

static void writer_close_handles(Writer *w) {
    sqlite3_finalize(w->symbol);
    sqlite3_finalize(w->occurrence);
    sqlite3_finalize(w->import);
    w->symbol = w->occurrence = w->import = NULL;
    if (w->db) sqlite3_close_v2(w->db);
    w->db = NULL;
}

/* Open the index file (and attach `scratch`) and prepare the statements; without the GIL; nonzero on failure. */
static int writer_open(Writer *w, const char *path, const char *scratch, const char *attach) {
    int failed = sqlite3_open_v2(path, &w->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
                 sqlite3_exec(w->db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;", NULL, NULL, NULL) != SQLITE_OK ||
                 (attach && sqlite3_exec(w->db, attach, NULL, NULL, NULL) != SQLITE_OK) ||
                 (attach && sqlite3_exec(w->db, "PRAGMA scratch.journal_mode=OFF; PRAGMA scratch.synchronous=OFF;", NULL,
                                         NULL, NULL) != SQLITE_OK);
    const char *insert_occurrence =
        scratch ? "INSERT INTO scratch.occurrences VALUES (?, ?, ?)" : "INSERT INTO occurrences VALUES (?, ?, ?)";
    return failed ||
           sqlite3_prepare_v2(w->db, "INSERT INTO symbols VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", -1, &w->symbol,
                              NULL) != SQLITE_OK ||
           sqlite3_prepare_v2(w->db, insert_occurrence, -1, &w->occurrence, NULL) != SQLITE_OK ||
           sqlite3_prepare_v2(w->db, "INSERT INTO imports VALUES (?, ?, '', '', ?)", -1, &w->import, NULL) != SQLITE_OK;
}

static int writer_init(Writer *w, PyObject *args, PyObject *kwds) {
    (void)kwds;
    const char *path, *scratch = NULL;
    if (!PyArg_ParseTuple(args, "s|z", &path, &scratch) || writer_enter(w, "__init__") < 0) return -1;
    writer_close_handles(w);
    /* With `scratch`: the occurrence rows go to that file's `occurrences` table (attached as `scratch`), from which
       the build copies them in key order into the index's own (codenav/builder.py). */
    char *attach = scratch ? sqlite3_mprintf("ATTACH %Q AS scratch", scratch) : NULL;
    if (scratch && attach == NULL) {
        PyErr_NoMemory();
        w->busy = 0;
        return -1;
    }
    int failed;
    if (sqlite_threads) {
        Py_BEGIN_ALLOW_THREADS;
        failed = writer_open(w, path, scratch, attach);
        Py_END_ALLOW_THREADS;
    } else {
        failed = writer_open(w, path, scratch, attach);
    }
    sqlite3_free(attach);
    if (failed) {
        sqlite_error(w->db, "open");
        writer_close_handles(w);
    }
    w->busy = 0;
    return failed ? -1 : 0;
}

static void writer_dealloc(Writer *w) {
    writer_close_handles(w);
    free(w->packed);
    w->packed = NULL;
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyObject *writer_exec(Writer *w, const char *sql) {
    if (writer_enter(w, sql) < 0) return NULL;
    if (w->db == NULL) {
        PyErr_SetString(PyExc_ValueError, "codenav index writer: closed");
        w->busy = 0;
        return NULL;
    }
    int rc;
    if (sqlite_threads) {
        Py_BEGIN_ALLOW_THREADS; /* COMMIT writes the transaction's pages: seconds on a big tree */
        rc = sqlite3_exec(w->db, sql, NULL, NULL, NULL);
        Py_END_ALLOW_THREADS;
    } else {
        rc = sqlite3_exec(w->db, sql, NULL, NULL, NULL);
    }
    w->busy = 0;
    if (rc != SQLITE_OK) return sqlite_error(w->db, sql);
    Py_RETURN_NONE;
}

static PyObject *writer_begin(Writer *w, PyObject *unused) {
    (void)unused;
    return writer_exec(w, "BEGIN");
}

static PyObject *writer_commit(Writer *w, PyObject *unused) {
    (void)unused;
    return writer_exec(w, "COMMIT");
}

static PyObject *writer_close(Writer *w, PyObject *unused) {
    (void)unused;
    if (writer_enter(w, "close") < 0) return NULL;
    if (sqlite_threads) {
        Py_BEGIN_ALLOW_THREADS;
        writer_close_handles(w);
        Py_END_ALLOW_THREADS;
    } else {
        writer_close_handles(w);
    }
    w->busy = 0;
    Py_RETURN_NONE;
}

/* Binds text s[0:n] as the Python path would store it, `angle`: in <>. ASCII as it is (the input outlives the
   statement's step), anything else decoded with "replace" like scan_c's strings, so that both paths store the
   same text: that takes the GIL for a moment when the call runs without it. */
static int bind_text_in(sqlite3_stmt *stmt, int column, const uint8_t *s, Py_ssize_t n, int angle) {
    if (ascii(s, n)) {
        if (!angle) return sqlite3_bind_text(stmt, column, (const char *)s, (int)n, SQLITE_STATIC);
        char *text = malloc((size_t)n + 2);
        if (text == NULL) return SQLITE_NOMEM;
        text[0] = '<';
        memcpy(text + 1, s, (size_t)n);
        text[n + 1] = '>';
        return sqlite3_bind_text(stmt, column, text, (int)n + 2, free);
    }
    int was = gil_hold();
    PyObject *text = decode(s, n);
    if (text != NULL && angle) Py_SETREF(text, PyUnicode_FromFormat("<%U>", text));
    Py_ssize_t size;
    const char *utf8 = text == NULL ? NULL : PyUnicode_AsUTF8AndSize(text, &size);
    int rc = utf8 == NULL ? SQLITE_NOMEM : sqlite3_bind_text(stmt, column, utf8, (int)size, SQLITE_TRANSIENT);
    Py_XDECREF(text);
    gil_resume(was); /* an exception set stays this thread's: the call raises it once it holds the GIL again */
    return rc;
}

static int bind_text(sqlite3_stmt *stmt, int column, const uint8_t *s, Py_ssize_t n) {
    return bind_text_in(stmt, column, s, n, 0);
}

/* The `symbols` and `occurrences` rows of a scanned file (may run without the GIL): 0, -1 on an SQLite error, -2 out
   of memory (an exception may be set by bind_text; else the caller sets it). */
static int insert_rows(Writer *w, Parser *p, sqlite3_int64 file_id) {
    for (Py_ssize_t k = 0; k < p->defs.count; k++) {
        SymbolFields f;
        symbol_fields(p, k, &f);
        sqlite3_stmt *st = w->symbol;
        int rc = sqlite3_bind_int64(st, 1, file_id);
        if (rc == SQLITE_OK) rc = bind_text(st, 2, f.name, f.name_length);
        if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 3, f.kind, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK) rc = bind_text(st, 4, (const uint8_t *)f.container, (Py_ssize_t)strlen(f.container));
        for (int c = 0; c < 8 && rc == SQLITE_OK; c++) rc = sqlite3_bind_int64(st, 5 + c, f.at[c]);
        if (rc == SQLITE_OK && sqlite3_step(st) != SQLITE_DONE) rc = SQLITE_ERROR;
        sqlite3_reset(st);
        if (rc != SQLITE_OK) return -1;
    }
    Groups groups = {0};
    int result = 0;
    if (build_groups(p, &groups) < 0) {
        groups_free(&groups);
        return -2;
    }
    for (Py_ssize_t k = 0; k < groups.count && result == 0; k++) {
        const Group *g = &groups.groups[k];
        if (group_elided(g, p->s)) continue;
        sqlite3_stmt *st = w->occurrence;
        if (packed_bound(g->used) > w->packed_capacity) {
            uint8_t *grown = realloc(w->packed, (size_t)packed_bound(g->used));
            if (grown == NULL) {
                groups_free(&groups);
                return -2;
            }
            w->packed = grown;
            w->packed_capacity = packed_bound(g->used);
        }
        Py_ssize_t size = g->used ? pack_text(g->positions, g->used, w->packed) : 0;
        int rc = bind_text(st, 1, p->s + g->start, g->length);
        if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 2, file_id);
        /* a zero-length blob, not NULL, for a defined name that never occurs */
        if (rc == SQLITE_OK) rc = sqlite3_bind_blob(st, 3, size ? (const void *)w->packed : "", (int)size, SQLITE_STATIC);
        if (rc == SQLITE_OK && sqlite3_step(st) != SQLITE_DONE) rc = SQLITE_ERROR;
        sqlite3_reset(st);
        if (rc != SQLITE_OK) result = -1;
    }
    groups_free(&groups);
    return result;
}

/* The `imports` rows of a C file: its #include targets (module, no name nor alias, line); may run without the GIL. */
static int insert_includes(Writer *w, const uint8_t *s, const LexOut *out, sqlite3_int64 file_id) {
    for (Py_ssize_t k = 0; k < out->count; k++) {
        const Include *inc = &out->includes[k];
        sqlite3_stmt *st = w->import;
        int rc = sqlite3_bind_int64(st, 1, file_id);
        if (rc == SQLITE_OK) rc = bind_text_in(st, 2, s + inc->start, inc->length, inc->angle);
        if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 3, inc->line);
        if (rc == SQLITE_OK && sqlite3_step(st) != SQLITE_DONE) rc = SQLITE_ERROR;
        sqlite3_reset(st);
        if (rc != SQLITE_OK) return -1;
    }
    return 0;
}

/* Writer.scan's work: lex, parse, insert (0, -1 SQLite error, -2 out of memory). */
static int scan_into(Writer *w, const Py_buffer *view, Scanned *sc, sqlite3_int64 file_id) {
    if (scan_buffer(view, sc) < 0) return -2;
    int rc = insert_rows(w, &sc->parser, file_id);
    return rc == 0 ? insert_includes(w, (const uint8_t *)view->buf, &sc->out, file_id) : rc;
}

static PyObject *writer_scan(Writer *w, PyObject *args) {
    Py_buffer view;
    Py_ssize_t file_id;
    if (writer_enter(w, "scan") < 0) return NULL;
    if (w->db == NULL) {
        PyErr_SetString(PyExc_ValueError, "codenav index writer: closed");
        w->busy = 0;
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*n", &view, &file_id)) {
        w->busy = 0;
        return NULL;
    }
    PyObject *result = NULL;
    Scanned sc = {0};
    if (check_size(&view, "scan") < 0) goto done;
    if (sqlite_threads && view.len >= RELEASE_BYTES) gil_release();
    int rc = scan_into(w, &view, &sc, (sqlite3_int64)file_id);
    gil_hold();
    if (rc == -1 && !PyErr_Occurred()) sqlite_error(w->db, "insert");
    if (rc == -2 && !PyErr_Occurred()) PyErr_NoMemory();
    if (rc < 0) goto done;
    result = PyLong_FromSsize_t(sc.out.count);
done:
    scanned_free(&sc);
    PyBuffer_Release(&view);
    w->busy = 0;
    return result;
}

static PyMethodDef WRITER_METHODS[] = {
    {"begin", (PyCFunction)writer_begin, METH_NOARGS, "Start a transaction."},
    {"commit", (PyCFunction)writer_commit, METH_NOARGS, "Commit the transaction."},
    {"scan", (PyCFunction)writer_scan, METH_VARARGS,
     "scan(data, file_id) -> number of #includes: scan a C file and insert its symbols, occurrences and imports rows."},
    {"close", (PyCFunction)writer_close, METH_NOARGS, "Close the connection (idempotent)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "codewell.codenav._lex.Writer",
    .tp_basicsize = sizeof(Writer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Writer(path[, scratch]): inserts scanned C files' rows into the codenav index file at path (the\n"
              "occurrence rows into the file `scratch`, attached, when given).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)writer_init,
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_methods = WRITER_METHODS,
};

/* longest_line(data, limit): the length of the longest line within the first `limit` bytes (codenav's
   minified-file test; the Python split it replaces cost a seventh of the C extraction). */
static PyObject *longest_line(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*n", &view, &limit)) return NULL;
    const char *s = (const char *)view.buf;
    Py_ssize_t n = view.len < limit ? view.len : limit, at = 0, longest = 0;
    if (n < 0) n = 0;
    while (at < n) {
        const char *newline = memchr(s + at, '\n', (size_t)(n - at));
        Py_ssize_t end = newline ? newline - s : n;
        if (end - at > longest) longest = end - at;
        at = end + 1;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(longest);
}

static PyMethodDef METHODS[] = {
    {"pack_positions", pack_positions, METH_VARARGS, "pack_positions(text) -> bytes: 'line:col:role;...' packed."},
    {"unpack_positions", unpack_positions, METH_VARARGS,
     "unpack_positions(packed) -> [(line, col, role), ...]: packed positions as (int, int, str) tuples."},
    {"longest_line", longest_line, METH_VARARGS, "longest_line(data, limit) -> length of the longest line in data[:limit]."},
    {"scan_c", scan_c, METH_VARARGS,
     "scan_c(data[, file_id]) -> (symbols, occurrence rows, includes): definitions, identifiers grouped by name,\n"
     "#includes. With file_id, symbols and occurrence rows are the rows of codenav's index tables for that file."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_lex", "Native C symbol scanner for codenav.", -1, METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__lex(void) {
    keywords_init();
    sqlite_threads = sqlite3_threadsafe() != 0;
    if (PyType_Ready(&WriterType) < 0) return NULL;
    PyObject *module = PyModule_Create(&MODULE);
    if (module == NULL) return NULL;
    Py_INCREF(&WriterType);
    if (PyModule_AddObject(module, "Writer", (PyObject *)&WriterType) < 0) {
        Py_DECREF(&WriterType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
