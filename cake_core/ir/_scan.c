/* The scanner of cake_core/ir/lexer.py for well-formed text, in C.
 *
 * scan(text) gives the same four lists as lexer._scan_python (token texts, lines, first columns, columns
 * after the end), or None: for any text it does not scan exactly as the Python scanner would -- a
 * lexical error of any kind, a character outside ASCII, a number followed by a second dot -- it stops
 * and leaves the text to the Python scanner, which is the definition of the token grammar and the
 * one that reports errors. So this file only has to be right about text it accepts; the test
 * tests/verify/test_scan_fast.py compares the two on the corpus, the schedules and random edits of them.
 *
 * The grammar, as lexer._VALID writes it (ASCII):
 *   NAME    [A-Za-z_]\w*, then any number of `.` [A-Za-z_]\w*
 *   OP      one of - + * / % ( ) [ ] { } , :   or  <= >= == != <- .. ^T  or  < > =
 *   NUMBER  \d+, then `B` not followed by a word character (a swizzle width, 128B), or a fraction
 *           `.` \d* not followed by `.` and an optional exponent, or an exponent [eE][-+]?\d+
 * A line's code ends at its first `#`. Spaces and tabs separate tokens; indentation (spaces only) opens
 * and closes blocks on a logical line, which is a line entered with no bracket open.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_INDENTS 200

static PyObject *NEWLINE, *INDENT, *DEDENT, *EOF_TOKEN;

typedef struct {
    PyObject *texts, *lines, *cols, *ends;
} Tokens;

static int is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) { return is_name_start(c) || is_digit(c); }

/* Append one token; 0, or -1 with an exception set. */
static int push(Tokens *t, PyObject *text, Py_ssize_t line, Py_ssize_t col, Py_ssize_t end) {
    PyObject *l = PyLong_FromSsize_t(line), *c = PyLong_FromSsize_t(col), *e = PyLong_FromSsize_t(end);
    int bad = l == NULL || c == NULL || e == NULL || PyList_Append(t->texts, text) < 0 ||
              PyList_Append(t->lines, l) < 0 || PyList_Append(t->cols, c) < 0 || PyList_Append(t->ends, e) < 0;
    Py_XDECREF(l);
    Py_XDECREF(c);
    Py_XDECREF(e);
    return bad ? -1 : 0;
}

/* The end of an exponent [eE][-+]?\d+ starting at i, or i when there is none. */
static Py_ssize_t exponent(const char *s, Py_ssize_t i, Py_ssize_t stop) {
    if (i < stop && (s[i] == 'e' || s[i] == 'E')) {
        Py_ssize_t j = i + 1;
        if (j < stop && (s[j] == '+' || s[j] == '-')) j++;
        if (j < stop && is_digit(s[j])) {
            while (j < stop && is_digit(s[j])) j++;
            return j;
        }
    }
    return i;
}

/* The end of the token starting at s[i] (not a space), updating *depth for brackets; -1 where the
 * Python scanner must decide (a character no token starts with, a bracket closing nothing, a number
 * whose fraction runs into a second dot). */
static Py_ssize_t token_end(const char *s, Py_ssize_t i, Py_ssize_t stop, long *depth) {
    char c = s[i];
    if (is_name_start(c)) {
        i++;
        while (i < stop && is_word(s[i])) i++;
        while (i + 1 < stop && s[i] == '.' && is_name_start(s[i + 1])) {
            i += 2;
            while (i < stop && is_word(s[i])) i++;
        }
        return i;
    }
    if (is_digit(c)) {
        while (i < stop && is_digit(s[i])) i++;
        if (i < stop && s[i] == 'B') {
            return (i + 1 < stop && is_word(s[i + 1])) ? i : i + 1; /* `B\b`, else the digits alone */
        }
        if (i < stop && s[i] == '.') {
            Py_ssize_t j = i + 1;
            while (j < stop && is_digit(s[j])) j++;
            if (j < stop && s[j] == '.') {
                /* `1..`: the digits, then the range operator; `1.5.`: the regex backtracks, leave it */
                return j == i + 1 ? i : -1;
            }
            return exponent(s, j, stop);
        }
        return exponent(s, i, stop);
    }
    char next = i + 1 < stop ? s[i + 1] : '\0';
    switch (c) {
    case '(': case '[': case '{':
        ++*depth;
        return i + 1;
    case ')': case ']': case '}':
        return --*depth < 0 ? -1 : i + 1;
    case '-': case '+': case '*': case '/': case '%': case ',': case ':':
        return i + 1;
    case '<':
        return (next == '=' || next == '-') ? i + 2 : i + 1;
    case '>': case '=':
        return next == '=' ? i + 2 : i + 1;
    case '!':
        return next == '=' ? i + 2 : -1;
    case '.':
        return next == '.' ? i + 2 : -1;
    case '^':
        return next == 'T' ? i + 2 : -1;
    default:
        return -1;
    }
}

/* 1 when the text was scanned into t, 0 when the Python scanner must take it, -1 on an exception. */
static int scan_into(Tokens *t, PyObject *text) {
    const char *s = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t indents[MAX_INDENTS] = {0};
    int levels = 1;
    long depth = 0;
    Py_ssize_t line = 0, pos = 0, row_len = 0;
    for (;;) {
        Py_ssize_t eol = pos;
        while (eol < n && s[eol] != '\n') eol++;
        Py_ssize_t stop = pos; /* where the code ends: the first `#` */
        while (stop < eol && s[stop] != '#') stop++;
        line++;
        row_len = eol - pos;
        Py_ssize_t i = pos;
        int blank = 0;
        if (depth == 0) {
            /* a logical line: its indentation opens or closes blocks; blank lines do not count */
            Py_ssize_t body = pos;
            while (body < stop && (s[body] == ' ' || s[body] == '\t')) body++;
            blank = body == stop;
            if (!blank) {
                Py_ssize_t width = body - pos;
                for (Py_ssize_t k = pos; k < body; k++) {
                    if (s[k] == '\t') return 0;
                }
                if (width > indents[levels - 1]) {
                    if (levels == MAX_INDENTS) return 0;
                    indents[levels++] = width;
                    if (push(t, INDENT, line, 1, width + 1) < 0) return -1;
                }
                while (width < indents[levels - 1]) {
                    levels--;
                    if (push(t, DEDENT, line, width + 1, width + 1) < 0) return -1;
                }
                if (width != indents[levels - 1]) return 0;
                i = body;
            }
        }
        if (!blank) {
            while (i < stop) {
                if (s[i] == ' ' || s[i] == '\t') {
                    i++;
                    continue;
                }
                Py_ssize_t end = token_end(s, i, stop, &depth);
                if (end < 0) return 0;
                PyObject *tok = PyUnicode_Substring(text, i, end);
                if (tok == NULL) return -1;
                int bad = push(t, tok, line, i - pos + 1, end - pos + 1);
                Py_DECREF(tok);
                if (bad < 0) return -1;
                i = end;
            }
            if (depth == 0 && push(t, NEWLINE, line, row_len + 1, row_len + 1) < 0) return -1;
        }
        if (eol >= n) break;
        pos = eol + 1;
    }
    if (depth) return 0; /* a bracket is never closed */
    while (levels > 1) {
        levels--;
        if (push(t, DEDENT, line, row_len + 1, row_len + 1) < 0) return -1;
    }
    return push(t, EOF_TOKEN, line, row_len + 1, row_len + 1) < 0 ? -1 : 1;
}

static PyObject *scan(PyObject *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "scan() takes a str");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) return NULL; /* a legacy string made ready (always ready from 3.12) */
#endif
    if (!PyUnicode_IS_ASCII(text)) Py_RETURN_NONE;
    Tokens t = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0)};
    PyObject *out = NULL;
    if (t.texts && t.lines && t.cols && t.ends) {
        int done = scan_into(&t, text);
        if (done > 0) {
            out = PyTuple_Pack(4, t.texts, t.lines, t.cols, t.ends);
        } else if (done == 0) {
            out = Py_NewRef(Py_None);
        }
    }
    Py_XDECREF(t.texts);
    Py_XDECREF(t.lines);
    Py_XDECREF(t.cols);
    Py_XDECREF(t.ends);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O,
     "scan(text) -> (texts, lines, cols, ends), or None where lexer._scan_python must scan the text"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cake_core.ir._scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    /* the structural tokens' texts, as lexer.py defines them (checked there on import) */
    NEWLINE = PyUnicode_InternFromString(" NEWLINE");
    INDENT = PyUnicode_InternFromString(" INDENT");
    DEDENT = PyUnicode_InternFromString(" DEDENT");
    EOF_TOKEN = PyUnicode_InternFromString(" EOF");
    if (!NEWLINE || !INDENT || !DEDENT || !EOF_TOKEN) return NULL;
    return PyModule_Create(&module);
}
