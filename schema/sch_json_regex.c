/*
 * sch_json_regex.c: compiles JSON Schema "pattern" regexes (ECMA-262).
 *
 * Why our own engine: POSIX regcomp has no \d \w \s, lazy quantifiers,
 * lookahead or Unicode properties, and a translation layer would still
 * backtrack exponentially on hostile input. This is a small ECMA-262 engine
 * in "unicode mode" (the JSON Schema spec's choice): it works on code
 * points, \p{...} uses Unicode general categories, and the matcher is
 * memoised so its work is bounded (see sch_json_regex.h).
 *
 * Supported: literals, '.', [...] and [^...] with ranges and escapes,
 * \d \D \w \W \s \S (ASCII \d and \w, Unicode \s, as ECMA says),
 * \p{..} \P{..} for general categories (L, Letter, Lu, Nd, digit, ...,
 * gc=..., Any, Assigned), \t \n \v \f \r \0 \cX \xHH \uHHHH
 * (surrogate pairs joined) \u{...}, ^ $ \b \B (no multiline flag: ^ and $
 * are the ends of the string), groups ( ) (?: ) (?<name> ), alternation,
 * * + ? {n} {n,} {n,m} and their lazy forms, lookahead (?= ) (?! ) and
 * lookbehind (?<= ) (?<! ).
 *
 * Rejected as TB_EUNSUPPORTED (valid ECMA we do not run): backreferences
 * \1 and \k<name>, Unicode script and binary properties other than Any
 * and Assigned, repetition counts above 1000 or programs above
 * RX_MAX_PROG instructions. Rejected as TB_ESCHEMA: syntax errors,
 * including escapes ECMA does not define (\a, \z, \Z, ...), inline flags
 * (?i) and Python's (?P<name>). Leniency kept from ECMA's Annex B because
 * real schemas rely on it: a lone ']' or '}' and a '{' that does not start a
 * quantifier are literals, and any ASCII punctuation may be escaped.
 */
#include "schema/sch_json.h"
#include "schema/sch_json_regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define RX_MAX_COUNT 1000
#define INF UINT32_MAX

typedef enum { A_EMPTY, A_CHAR, A_ANY, A_CLASS, A_CAT, A_ALT, A_REPEAT, A_ASSERT, A_LOOK } ast_type_t;

typedef struct {
    uint8_t type, akind, flags;
    bool greedy;
    uint32_t cp;          /* A_CHAR */
    int32_t cls;          /* A_CLASS */
    int32_t child, next;  /* first child; next sibling */
    uint32_t min, max;    /* A_REPEAT */
} ast_t;

typedef struct {
    const char *s;
    size_t n, i;
    int rc;               /* 0, TB_ESCHEMA or TB_EUNSUPPORTED once failed */
    char *err;
    size_t errlen;
    ast_t *ast;
    size_t nast, capast;
    rx_class_t *cls;
    size_t ncls, capcls;
    rx_range_t *tmp;      /* ranges of the class being built */
    size_t ntmp, captmp;
    rx_inst_t *prog;
    size_t nprog, capprog;
} rx_parse_t;

__attribute__((format(printf, 3, 4)))
static void fail(rx_parse_t *p, int rc, const char *fmt, ...)
{
    if (p->rc) return;
    p->rc = rc;
    if (!p->err || !p->errlen) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    if (k >= 0 && (size_t)k < p->errlen)
        snprintf(p->err + k, p->errlen - (size_t)k, " at offset %zu", p->i);
}

static int32_t ast_new(rx_parse_t *p, ast_type_t t)
{
    if (p->nast == p->capast) {
        p->capast = p->capast ? p->capast * 2 : 32;
        p->ast = tb_realloc(p->ast, p->capast * sizeof *p->ast);
    }
    ast_t *a = &p->ast[p->nast];
    memset(a, 0, sizeof *a);
    a->type = (uint8_t)t;
    a->child = a->next = -1;
    return (int32_t)p->nast++;
}

/* Decodes one UTF-8 code point (invalid bytes stand for themselves). */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n) {
        *cp = c;
        return 1;
    }
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80) {
            *cp = c;
            return 1;
        }
        v = (v << 6) | (s[k] & 0x3f);
    }
    *cp = v;
    return len;
}

/* ---- character classes -------------------------------------------------- */

static void tmp_add(rx_parse_t *p, uint32_t lo, uint32_t hi)
{
    if (p->ntmp == p->captmp) {
        p->captmp = p->captmp ? p->captmp * 2 : 16;
        p->tmp = tb_realloc(p->tmp, p->captmp * sizeof *p->tmp);
    }
    p->tmp[p->ntmp++] = (rx_range_t){ lo, hi };
}

static const rx_range_t digit_r[] = { { '0', '9' } };
static const rx_range_t word_r[] = { { '0', '9' }, { 'A', 'Z' }, { '_', '_' }, { 'a', 'z' } };
static const rx_range_t space_r[] = {
    { 0x09, 0x0d }, { 0x20, 0x20 }, { 0xa0, 0xa0 }, { 0x1680, 0x1680 }, { 0x2000, 0x200a },
    { 0x2028, 0x2029 }, { 0x202f, 0x202f }, { 0x205f, 0x205f }, { 0x3000, 0x3000 }, { 0xfeff, 0xfeff },
};

/* Adds a sorted range set, or its complement over [0, 0x10FFFF]. */
static void tmp_add_set(rx_parse_t *p, const rx_range_t *r, size_t n, bool complement)
{
    if (!complement) {
        for (size_t i = 0; i < n; i++) tmp_add(p, r[i].lo, r[i].hi);
        return;
    }
    uint32_t next = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo > next) tmp_add(p, next, r[i].lo - 1);
        next = r[i].hi + 1;
    }
    if (next <= 0x10ffff) tmp_add(p, next, 0x10ffff);
}

static int range_cmp(const void *a, const void *b)
{
    const rx_range_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Turns the ranges collected in p->tmp into a class; returns its index. */
static int32_t class_finish(rx_parse_t *p, bool neg, uint32_t cats, uint32_t notcats, bool has_notcats)
{
    qsort(p->tmp, p->ntmp, sizeof *p->tmp, range_cmp);
    size_t o = 0;
    for (size_t i = 0; i < p->ntmp; i++) {
        if (o > 0 && p->tmp[i].lo <= p->tmp[o - 1].hi + 1) {
            if (p->tmp[i].hi > p->tmp[o - 1].hi) p->tmp[o - 1].hi = p->tmp[i].hi;
        } else {
            p->tmp[o++] = p->tmp[i];
        }
    }
    if (p->ncls == p->capcls) {
        p->capcls = p->capcls ? p->capcls * 2 : 8;
        p->cls = tb_realloc(p->cls, p->capcls * sizeof *p->cls);
    }
    rx_class_t *c = &p->cls[p->ncls];
    c->n = o;
    c->r = tb_malloc((o ? o : 1) * sizeof *c->r);
    memcpy(c->r, p->tmp, o * sizeof *c->r);
    c->cats = cats;
    c->notcats = notcats;
    c->has_notcats = has_notcats;
    c->neg = neg;
    p->ntmp = 0;
    return (int32_t)p->ncls++;
}

bool sch__json_rx_class_match(const rx_class_t *c, uint32_t cp)
{
    bool in = false;
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < c->r[mid].lo) hi = mid;
        else if (cp > c->r[mid].hi) lo = mid + 1;
        else { in = true; break; }
    }
    if (!in && (c->cats || c->has_notcats)) {
        uint32_t bit = sch__json_ucd_category_bit(cp);
        in = (bit & c->cats) || (c->has_notcats && !(bit & c->notcats));
    }
    return in != c->neg;
}

/* ---- escapes ------------------------------------------------------------ */

static int hexv(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
    return -1;
}

static bool read_hex(rx_parse_t *p, size_t digits, uint32_t *v)
{
    if (p->n - p->i < digits) return false;
    uint32_t r = 0;
    for (size_t k = 0; k < digits; k++) {
        int h = hexv(p->s[p->i + k]);
        if (h < 0) return false;
        r = r * 16 + (uint32_t)h;
    }
    p->i += digits;
    *v = r;
    return true;
}

/* \u after the 'u': HHHH (joining a surrogate pair) or {H...}. */
static bool read_unicode_escape(rx_parse_t *p, uint32_t *cp)
{
    if (p->i < p->n && p->s[p->i] == '{') {
        size_t j = p->i + 1;
        uint32_t v = 0;
        size_t nd = 0;
        while (j < p->n && hexv(p->s[j]) >= 0) {
            v = v * 16 + (uint32_t)hexv(p->s[j]);
            if (v > 0x10ffff) return false;
            j++;
            nd++;
        }
        if (nd == 0 || j >= p->n || p->s[j] != '}') return false;
        p->i = j + 1;
        *cp = v;
        return true;
    }
    if (!read_hex(p, 4, cp)) return false;
    if (*cp >= 0xd800 && *cp <= 0xdbff && p->n - p->i >= 6 && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
        size_t save = p->i;
        uint32_t lo;
        p->i += 2;
        if (read_hex(p, 4, &lo) && lo >= 0xdc00 && lo <= 0xdfff)
            *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
        else
            p->i = save;
    }
    return true;
}

/* \p{...} / \P{...} after the letter: sets *mask. */
static bool read_property(rx_parse_t *p, uint32_t *mask)
{
    if (p->i >= p->n || p->s[p->i] != '{') {
        fail(p, TB_ESCHEMA, "\\p needs {name}");
        return false;
    }
    size_t start = p->i + 1, j = start;
    while (j < p->n && p->s[j] != '}') j++;
    if (j >= p->n) {
        fail(p, TB_ESCHEMA, "unterminated \\p{");
        return false;
    }
    p->i = j + 1;
    if (!sch__json_ucd_lookup(p->s + start, j - start, mask)) {
        fail(p, TB_EUNSUPPORTED, "unsupported Unicode property \\p{%.*s}", (int)(j - start), p->s + start);
        return false;
    }
    return true;
}

typedef enum { ESC_CHAR, ESC_SET, ESC_PROP, ESC_ASSERT, ESC_FAIL } esc_kind_t;

typedef struct {
    esc_kind_t kind;
    uint32_t cp;              /* ESC_CHAR */
    const rx_range_t *set;    /* ESC_SET */
    size_t nset;
    bool complement;          /* ESC_SET, ESC_PROP (\P) */
    uint32_t mask;            /* ESC_PROP */
    uint8_t akind;            /* ESC_ASSERT */
} esc_t;

/* Reads an escape after the backslash. In a class \b is backspace and
 * \B is an error; outside it they are assertions. */
static esc_t read_escape(rx_parse_t *p, bool in_class)
{
    esc_t e = { .kind = ESC_CHAR };
    if (p->i >= p->n) {
        fail(p, TB_ESCHEMA, "pattern ends with a backslash");
        return (esc_t){ .kind = ESC_FAIL };
    }
    char c = p->s[p->i++];
    switch (c) {
    case 'd': case 'D':
        return (esc_t){ .kind = ESC_SET, .set = digit_r, .nset = TB_ARRAY_LEN(digit_r), .complement = c == 'D' };
    case 'w': case 'W':
        return (esc_t){ .kind = ESC_SET, .set = word_r, .nset = TB_ARRAY_LEN(word_r), .complement = c == 'W' };
    case 's': case 'S':
        return (esc_t){ .kind = ESC_SET, .set = space_r, .nset = TB_ARRAY_LEN(space_r), .complement = c == 'S' };
    case 'p': case 'P': {
        uint32_t mask;
        if (!read_property(p, &mask)) return (esc_t){ .kind = ESC_FAIL };
        return (esc_t){ .kind = ESC_PROP, .mask = mask, .complement = c == 'P' };
    }
    case 'b':
        if (in_class) { e.cp = 8; return e; }
        return (esc_t){ .kind = ESC_ASSERT, .akind = RX_WORDB };
    case 'B':
        if (in_class) break;
        return (esc_t){ .kind = ESC_ASSERT, .akind = RX_NWORDB };
    case 't': e.cp = '\t'; return e;
    case 'n': e.cp = '\n'; return e;
    case 'v': e.cp = '\v'; return e;
    case 'f': e.cp = '\f'; return e;
    case 'r': e.cp = '\r'; return e;
    case 'c':
        if (p->i < p->n && ((p->s[p->i] | 0x20) >= 'a' && (p->s[p->i] | 0x20) <= 'z')) {
            e.cp = (uint32_t)(p->s[p->i++] % 32);
            return e;
        }
        break;
    case '0':
        if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') break;
        e.cp = 0;
        return e;
    case 'x':
        if (read_hex(p, 2, &e.cp)) return e;
        break;
    case 'u':
        if (read_unicode_escape(p, &e.cp)) return e;
        break;
    case 'k':
        fail(p, TB_EUNSUPPORTED, "backreferences (\\k<name>) are not supported");
        return (esc_t){ .kind = ESC_FAIL };
    default:
        if (c >= '1' && c <= '9') {
            fail(p, TB_EUNSUPPORTED, "backreferences (\\%c) are not supported", c);
            return (esc_t){ .kind = ESC_FAIL };
        }
        /* identity escapes: ECMA's syntax characters and '/', and (leniently)
         * any other ASCII punctuation; never a letter or digit */
        if ((unsigned char)c < 0x80 && c > 0x20 && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') &&
            !(c >= '0' && c <= '9')) {
            e.cp = (uint32_t)c;
            return e;
        }
        break;
    }
    p->i--;
    fail(p, TB_ESCHEMA, "invalid escape \\%c", c);
    return (esc_t){ .kind = ESC_FAIL };
}

/* ---- parser: disjunction / alternative / term --------------------------- */

static int32_t parse_disjunction(rx_parse_t *p, unsigned depth);

static int32_t parse_class(rx_parse_t *p)
{
    /* p->i is just after '[' */
    bool neg = false;
    uint32_t cats = 0, notcats = ~0u;
    bool has_notcats = false;
    if (p->i < p->n && p->s[p->i] == '^') {
        neg = true;
        p->i++;
    }
    p->ntmp = 0;
    for (;;) {
        if (p->i >= p->n) {
            fail(p, TB_ESCHEMA, "unterminated character class");
            return -1;
        }
        if (p->s[p->i] == ']') {
            p->i++;
            break;
        }
        /* one class atom, possibly the start of a range */
        esc_t lo;
        if (p->s[p->i] == '\\') {
            p->i++;
            lo = read_escape(p, true);
        } else {
            lo = (esc_t){ .kind = ESC_CHAR };
            p->i += utf8_decode((const unsigned char *)p->s + p->i, p->n - p->i, &lo.cp);
        }
        if (lo.kind == ESC_FAIL) return -1;
        bool range = p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']';
        if (!range) {
            if (lo.kind == ESC_CHAR) tmp_add(p, lo.cp, lo.cp);
            else if (lo.kind == ESC_SET) tmp_add_set(p, lo.set, lo.nset, lo.complement);
            else if (lo.kind == ESC_PROP && !lo.complement) cats |= lo.mask;
            else if (lo.kind == ESC_PROP) { notcats &= lo.mask; has_notcats = true; }
            continue;
        }
        p->i++; /* '-' */
        esc_t hi;
        if (p->s[p->i] == '\\') {
            p->i++;
            hi = read_escape(p, true);
        } else {
            hi = (esc_t){ .kind = ESC_CHAR };
            p->i += utf8_decode((const unsigned char *)p->s + p->i, p->n - p->i, &hi.cp);
        }
        if (hi.kind == ESC_FAIL) return -1;
        if (lo.kind != ESC_CHAR || hi.kind != ESC_CHAR) {
            fail(p, TB_ESCHEMA, "a class escape cannot bound a range");
            return -1;
        }
        if (lo.cp > hi.cp) {
            fail(p, TB_ESCHEMA, "range out of order in character class");
            return -1;
        }
        tmp_add(p, lo.cp, hi.cp);
    }
    int32_t a = ast_new(p, A_CLASS);
    p->ast[a].cls = class_finish(p, neg, cats, has_notcats ? notcats : 0, has_notcats);
    return a;
}

/* Parses {n}, {n,}, {n,m} at p->i; false (and p->i unchanged) when the
 * brace does not start a quantifier, in which case it is a literal. */
static bool parse_braces(rx_parse_t *p, uint32_t *min, uint32_t *max)
{
    size_t j = p->i + 1;
    uint64_t a = 0, b;
    size_t nd = 0;
    while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') {
        if (a < 100000000) a = a * 10 + (uint64_t)(p->s[j] - '0');
        j++;
        nd++;
    }
    if (nd == 0 || j >= p->n) return false;
    if (p->s[j] == '}') {
        b = a;
    } else if (p->s[j] == ',') {
        j++;
        size_t nd2 = 0;
        b = 0;
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') {
            if (b < 100000000) b = b * 10 + (uint64_t)(p->s[j] - '0');
            j++;
            nd2++;
        }
        if (j >= p->n || p->s[j] != '}') return false;
        if (nd2 == 0) b = INF;
    } else {
        return false;
    }
    p->i = j + 1;
    if (b != INF && a > b) {
        fail(p, TB_ESCHEMA, "numbers out of order in {} quantifier");
        return false;
    }
    if (a > RX_MAX_COUNT || (b != INF && b > RX_MAX_COUNT)) {
        fail(p, TB_EUNSUPPORTED, "repetition count above %d", RX_MAX_COUNT);
        return false;
    }
    *min = (uint32_t)a;
    *max = (uint32_t)b;
    return true;
}

static bool is_quantifier_start(rx_parse_t *p)
{
    if (p->i >= p->n) return false;
    char c = p->s[p->i];
    if (c == '*' || c == '+' || c == '?') return true;
    if (c != '{') return false;
    size_t save = p->i;
    uint32_t a, b;
    int rc = p->rc;
    bool q = parse_braces(p, &a, &b);
    p->i = save;
    if (!rc && p->rc) return true; /* a malformed count: let the caller fail */
    return q;
}

/* An atom with its quantifier; -1 on error, or when at the end of an
 * alternative ('|', ')' or end of input) with *end set. */
static int32_t parse_term(rx_parse_t *p, unsigned depth, bool *end)
{
    *end = false;
    if (p->i >= p->n || p->s[p->i] == '|' || p->s[p->i] == ')') {
        *end = true;
        return -1;
    }
    char c = p->s[p->i];
    int32_t atom = -1;
    bool quantifiable = true;
    if (c == '^' || c == '$') {
        p->i++;
        atom = ast_new(p, A_ASSERT);
        p->ast[atom].akind = c == '^' ? RX_BOL : RX_EOL;
        quantifiable = false;
    } else if (c == '.') {
        p->i++;
        atom = ast_new(p, A_ANY);
    } else if (c == '[') {
        p->i++;
        atom = parse_class(p);
    } else if (c == '(') {
        if (depth >= RX_MAX_NEST) {
            fail(p, TB_EUNSUPPORTED, "groups nested deeper than %d", RX_MAX_NEST);
            return -1;
        }
        p->i++;
        uint8_t look = 0;
        bool is_look = false;
        if (p->i < p->n && p->s[p->i] == '?') {
            const char *q = p->s + p->i + 1;
            size_t rest = p->n - p->i - 1;
            if (rest >= 1 && q[0] == ':') {
                p->i += 2;
            } else if (rest >= 1 && (q[0] == '=' || q[0] == '!')) {
                is_look = true;
                look = q[0] == '!' ? RX_LOOK_NEG : 0;
                p->i += 2;
            } else if (rest >= 2 && q[0] == '<' && (q[1] == '=' || q[1] == '!')) {
                is_look = true;
                look = RX_LOOK_BEHIND | (q[1] == '!' ? RX_LOOK_NEG : 0);
                p->i += 3;
            } else if (rest >= 1 && q[0] == '<') {
                /* named group: (?<name> with an identifier name */
                size_t j = p->i + 2, st = j;
                while (j < p->n && (p->s[j] == '_' || p->s[j] == '$' || (unsigned char)p->s[j] >= 0x80 ||
                                    ((p->s[j] | 0x20) >= 'a' && (p->s[j] | 0x20) <= 'z') ||
                                    (j > st && p->s[j] >= '0' && p->s[j] <= '9')))
                    j++;
                if (j == st || j >= p->n || p->s[j] != '>') {
                    fail(p, TB_ESCHEMA, "invalid group name");
                    return -1;
                }
                p->i = j + 1;
            } else {
                fail(p, TB_ESCHEMA, "invalid group syntax (?%c", rest ? q[0] : ' ');
                return -1;
            }
        }
        int32_t inner = parse_disjunction(p, depth + 1);
        if (p->rc) return -1;
        if (p->i >= p->n || p->s[p->i] != ')') {
            fail(p, TB_ESCHEMA, "missing )");
            return -1;
        }
        p->i++;
        if (is_look) {
            atom = ast_new(p, A_LOOK);
            p->ast[atom].flags = look;
            p->ast[atom].child = inner;
            /* ECMA (unicode mode) does not allow quantifying a lookaround */
            quantifiable = false;
        } else {
            atom = inner;
        }
    } else if (c == '\\') {
        p->i++;
        esc_t e = read_escape(p, false);
        if (e.kind == ESC_FAIL) return -1;
        if (e.kind == ESC_ASSERT) {
            atom = ast_new(p, A_ASSERT);
            p->ast[atom].akind = e.akind;
            quantifiable = false;
        } else if (e.kind == ESC_CHAR) {
            atom = ast_new(p, A_CHAR);
            p->ast[atom].cp = e.cp;
        } else {
            p->ntmp = 0;
            uint32_t cats = 0, notcats = 0;
            bool has_not = false;
            if (e.kind == ESC_SET) tmp_add_set(p, e.set, e.nset, e.complement);
            else if (!e.complement) cats = e.mask;
            else { notcats = e.mask; has_not = true; }
            atom = ast_new(p, A_CLASS);
            p->ast[atom].cls = class_finish(p, false, cats, notcats, has_not);
        }
    } else if (c == '*' || c == '+' || c == '?' || (c == '{' && is_quantifier_start(p))) {
        if (!p->rc) fail(p, TB_ESCHEMA, "nothing to repeat");
        return -1;
    } else {
        /* a literal, including Annex B's lone ']', '}' and non-quantifier '{' */
        atom = ast_new(p, A_CHAR);
        uint32_t cp;
        p->i += utf8_decode((const unsigned char *)p->s + p->i, p->n - p->i, &cp);
        p->ast[atom].cp = cp;
    }
    if (atom < 0 || p->rc) return -1;

    if (!is_quantifier_start(p)) return atom;
    if (p->rc) return -1;
    if (!quantifiable) {
        fail(p, TB_ESCHEMA, "nothing to repeat (assertion)");
        return -1;
    }
    uint32_t min, max;
    char q = p->s[p->i];
    if (q == '*') { min = 0; max = INF; p->i++; }
    else if (q == '+') { min = 1; max = INF; p->i++; }
    else if (q == '?') { min = 0; max = 1; p->i++; }
    else if (!parse_braces(p, &min, &max)) return -1;
    bool greedy = true;
    if (p->i < p->n && p->s[p->i] == '?') {
        greedy = false;
        p->i++;
    }
    int32_t r = ast_new(p, A_REPEAT);
    p->ast[r].min = min;
    p->ast[r].max = max;
    p->ast[r].greedy = greedy;
    p->ast[r].child = atom;
    if (is_quantifier_start(p) && !p->rc) {
        fail(p, TB_ESCHEMA, "nothing to repeat (double quantifier)");
        return -1;
    }
    return r;
}

static int32_t parse_alternative(rx_parse_t *p, unsigned depth)
{
    int32_t cat = ast_new(p, A_CAT), last = -1;
    for (;;) {
        bool end;
        int32_t t = parse_term(p, depth, &end);
        if (end) break;
        if (t < 0) return -1;
        if (last < 0) p->ast[cat].child = t;
        else p->ast[last].next = t;
        last = t;
    }
    return cat;
}

static int32_t parse_disjunction(rx_parse_t *p, unsigned depth)
{
    int32_t first = parse_alternative(p, depth);
    if (first < 0 || p->i >= p->n || p->s[p->i] != '|') return first;
    int32_t alt = ast_new(p, A_ALT), last = first;
    p->ast[alt].child = first;
    while (p->i < p->n && p->s[p->i] == '|') {
        p->i++;
        int32_t next = parse_alternative(p, depth);
        if (next < 0) return -1;
        p->ast[last].next = next;
        last = next;
    }
    return alt;
}

/* ---- code generation ---------------------------------------------------- */

static size_t emit(rx_parse_t *p, rx_op_t op, uint32_t a, uint32_t b)
{
    if (p->nprog == p->capprog) {
        p->capprog = p->capprog ? p->capprog * 2 : 64;
        p->prog = tb_realloc(p->prog, p->capprog * sizeof *p->prog);
    }
    p->prog[p->nprog] = (rx_inst_t){ .op = (uint8_t)op, .a = a, .b = b };
    return p->nprog++;
}

static void gen(rx_parse_t *p, int32_t n)
{
    if (p->rc) return;
    if (p->nprog > RX_MAX_PROG) {
        fail(p, TB_EUNSUPPORTED, "pattern expands to more than %d instructions", RX_MAX_PROG);
        return;
    }
    const ast_t *a = &p->ast[n];
    switch (a->type) {
    case A_EMPTY: break;
    case A_CHAR: emit(p, RX_CHAR, a->cp, 0); break;
    case A_ANY: emit(p, RX_ANY, 0, 0); break;
    case A_CLASS: emit(p, RX_CLASS, (uint32_t)a->cls, 0); break;
    case A_ASSERT: emit(p, (rx_op_t)a->akind, 0, 0); break;
    case A_CAT:
        for (int32_t c = a->child; c >= 0; c = p->ast[c].next) gen(p, c);
        break;
    case A_ALT: {
        /* SPLIT L1, next; L1: x; JMP end; next: SPLIT L2, next2 ... last.
         * The pending JMPs are chained through their .a fields (0 ends the
         * chain: pc 0 is never a JMP target here) and patched at the end. */
        uint32_t chain = 0;
        for (int32_t c = a->child; c >= 0 && !p->rc; c = p->ast[c].next) {
            if (p->ast[c].next < 0) {
                gen(p, c);
                break;
            }
            size_t sp = emit(p, RX_SPLIT, 0, 0);
            p->prog[sp].a = (uint32_t)p->nprog;
            gen(p, c);
            if (p->rc) return;
            size_t j = emit(p, RX_JMP, chain, 0);
            chain = (uint32_t)j + 1;
            p->prog[sp].b = (uint32_t)p->nprog;
        }
        while (chain) {
            size_t j = chain - 1;
            chain = p->prog[j].a;
            p->prog[j].a = (uint32_t)p->nprog;
        }
        break;
    }
    case A_REPEAT: {
        uint32_t min = a->min, max = a->max;
        bool greedy = a->greedy;
        int32_t child = a->child;
        for (uint32_t k = 0; k < min && !p->rc; k++) gen(p, child);
        if (max == INF) {
            size_t sp = emit(p, RX_SPLIT, 0, 0);
            size_t body = p->nprog;
            gen(p, child);
            emit(p, RX_JMP, (uint32_t)sp, 0);
            uint32_t out = (uint32_t)p->nprog;
            p->prog[sp].a = greedy ? (uint32_t)body : out;
            p->prog[sp].b = greedy ? out : (uint32_t)body;
        } else {
            /* x? nested max-min times: each SPLIT's way out goes to the end;
             * the SPLITs are found again by walking the emitted code, since
             * each follows the previous copy of x directly. */
            size_t first = p->nprog;
            uint32_t copies = 0;
            for (uint32_t k = min; k < max && !p->rc; k++) {
                emit(p, RX_SPLIT, (uint32_t)p->nprog + 1, 0);
                gen(p, child);
                copies++;
            }
            if (p->rc) return;
            uint32_t out = (uint32_t)p->nprog;
            size_t copy_len = copies ? (p->nprog - first) / copies : 0;
            for (uint32_t k = 0; k < copies; k++) {
                rx_inst_t *s = &p->prog[first + k * copy_len];
                uint32_t body = (uint32_t)(first + k * copy_len) + 1;
                s->a = greedy ? body : out;
                s->b = greedy ? out : body;
            }
        }
        break;
    }
    case A_LOOK: {
        size_t lk = emit(p, RX_LOOK, 0, 0);
        p->prog[lk].flags = a->flags;
        gen(p, a->child);
        emit(p, RX_MATCH, 0, 0);
        p->prog[lk].b = (uint32_t)p->nprog;
        break;
    }
    }
}

/* Numbers SPLITs and LOOKs in program order and gives each LOOK the split
 * range of its sub-program (contiguous, because the sub-program is). */
static void number_states(sch__json_regex_t *re)
{
    uint32_t ns = 0, nl = 0;
    for (size_t pc = 0; pc < re->n; pc++) {
        if (re->prog[pc].op == RX_SPLIT) re->prog[pc].c = ns++;
        if (re->prog[pc].op == RX_LOOK) re->prog[pc].c = nl++;
    }
    for (size_t pc = 0; pc < re->n; pc++) {
        rx_inst_t *in = &re->prog[pc];
        if (in->op != RX_LOOK) continue;
        uint32_t first = UINT32_MAX, last = 0;
        for (size_t q = pc + 1; q < in->b; q++)
            if (re->prog[q].op == RX_SPLIT) {
                if (first == UINT32_MAX) first = re->prog[q].c;
                last = re->prog[q].c + 1;
            }
        in->d = first == UINT32_MAX ? 0 : first;
        in->e = first == UINT32_MAX ? 0 : last;
    }
    re->nsplits = ns;
    re->nlooks = nl;
}

/* True when every match must start at position 0 (the pattern begins with
 * '^' on its only alternative). */
static bool starts_anchored(const rx_parse_t *p, int32_t n)
{
    const ast_t *a = &p->ast[n];
    if (a->type == A_ASSERT) return a->akind == RX_BOL;
    if (a->type == A_CAT) return a->child >= 0 && starts_anchored(p, a->child);
    return false;
}

int sch__json_regex_compile(const char *src, size_t len, sch__json_regex_t **out, char *err, size_t errlen)
{
    *out = NULL;
    rx_parse_t p = { .s = src, .n = len, .err = err, .errlen = errlen };
    int32_t root = parse_disjunction(&p, 0);
    if (!p.rc && p.i < p.n) fail(&p, TB_ESCHEMA, "unmatched )");
    if (!p.rc) {
        gen(&p, root);
        emit(&p, RX_MATCH, 0, 0);
        if (!p.rc && p.nprog > RX_MAX_PROG)
            fail(&p, TB_EUNSUPPORTED, "pattern expands to more than %d instructions", RX_MAX_PROG);
    }
    sch__json_regex_t *re = NULL;
    if (!p.rc) {
        re = tb_calloc(1, sizeof *re);
        re->prog = p.prog;
        re->n = p.nprog;
        re->cls = p.cls;
        re->ncls = p.ncls;
        re->anchored = starts_anchored(&p, root);
        number_states(re);
        p.prog = NULL;
        p.cls = NULL;
    }
    for (size_t k = 0; p.cls && k < p.ncls; k++) free(p.cls[k].r);
    free(p.cls);
    free(p.prog);
    free(p.ast);
    free(p.tmp);
    *out = re;
    return p.rc;
}

void sch__json_regex_free(sch__json_regex_t *re)
{
    if (!re) return;
    for (size_t k = 0; k < re->ncls; k++) free(re->cls[k].r);
    free(re->cls);
    free(re->prog);
    free(re);
}
