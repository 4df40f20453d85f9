/*
 * sch_json_regex_parse.c: the syntax of JSON Schema patterns (ECMA-262,
 * unicode mode), parsed by recursive descent into a small AST that
 * sch_json_regex.c turns into a program. The dialect, and what is refused,
 * is described at the top of sch_json_regex.c.
 *
 * Recursion follows group nesting only, bounded by RX_MAX_NEST, so a
 * pattern of a thousand '(' is an error, not a stack overflow.
 */
#include "schema/sch_json.h"
#include "schema/sch_json_regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

void sch__json_rx_fail(rx_parse_t *p, int rc, const char *fmt, ...)
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

static int32_t ast_new(rx_parse_t *p, rx_ast_type_t t)
{
    if (p->nast == p->capast) {
        p->capast = p->capast ? p->capast * 2 : 32;
        p->ast = tb_realloc(p->ast, p->capast * sizeof *p->ast);
    }
    rx_ast_t *a = &p->ast[p->nast];
    memset(a, 0, sizeof *a);
    a->type = (uint8_t)t;
    a->child = a->next = -1;
    return (int32_t)p->nast++;
}

/* ---- escapes ------------------------------------------------------------ */

static const rx_range_t digit_r[] = { { '0', '9' } };
static const rx_range_t word_r[] = { { '0', '9' }, { 'A', 'Z' }, { '_', '_' }, { 'a', 'z' } };
static const rx_range_t space_r[] = {
    { 0x09, 0x0d }, { 0x20, 0x20 }, { 0xa0, 0xa0 }, { 0x1680, 0x1680 }, { 0x2000, 0x200a },
    { 0x2028, 0x2029 }, { 0x202f, 0x202f }, { 0x205f, 0x205f }, { 0x3000, 0x3000 }, { 0xfeff, 0xfeff },
};

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
        sch__json_rx_fail(p, TB_ESCHEMA, "\\p needs {name}");
        return false;
    }
    size_t start = p->i + 1, j = start;
    while (j < p->n && p->s[j] != '}') j++;
    if (j >= p->n) {
        sch__json_rx_fail(p, TB_ESCHEMA, "unterminated \\p{");
        return false;
    }
    p->i = j + 1;
    if (!sch__json_ucd_lookup(p->s + start, j - start, mask)) {
        sch__json_rx_fail(p, TB_EUNSUPPORTED, "unsupported Unicode property \\p{%.*s}", (int)(j - start), p->s + start);
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
        sch__json_rx_fail(p, TB_ESCHEMA, "pattern ends with a backslash");
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
        sch__json_rx_fail(p, TB_EUNSUPPORTED, "backreferences (\\k<name>) are not supported");
        return (esc_t){ .kind = ESC_FAIL };
    default:
        if (c >= '1' && c <= '9') {
            sch__json_rx_fail(p, TB_EUNSUPPORTED, "backreferences (\\%c) are not supported", c);
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
    sch__json_rx_fail(p, TB_ESCHEMA, "invalid escape \\%c", c);
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
            sch__json_rx_fail(p, TB_ESCHEMA, "unterminated character class");
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
            p->i += sch__json_rx_utf8((const unsigned char *)p->s + p->i, p->n - p->i, &lo.cp);
        }
        if (lo.kind == ESC_FAIL) return -1;
        bool range = p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']';
        if (!range) {
            if (lo.kind == ESC_CHAR) sch__json_rx_tmp_add(p, lo.cp, lo.cp);
            else if (lo.kind == ESC_SET) sch__json_rx_tmp_add_set(p, lo.set, lo.nset, lo.complement);
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
            p->i += sch__json_rx_utf8((const unsigned char *)p->s + p->i, p->n - p->i, &hi.cp);
        }
        if (hi.kind == ESC_FAIL) return -1;
        if (lo.kind != ESC_CHAR || hi.kind != ESC_CHAR) {
            sch__json_rx_fail(p, TB_ESCHEMA, "a class escape cannot bound a range");
            return -1;
        }
        if (lo.cp > hi.cp) {
            sch__json_rx_fail(p, TB_ESCHEMA, "range out of order in character class");
            return -1;
        }
        sch__json_rx_tmp_add(p, lo.cp, hi.cp);
    }
    int32_t a = ast_new(p, A_CLASS);
    p->ast[a].cls = sch__json_rx_class_finish(p, neg, cats, has_notcats ? notcats : 0, has_notcats);
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
        if (nd2 == 0) b = RX_INF;
    } else {
        return false;
    }
    p->i = j + 1;
    if (b != RX_INF && a > b) {
        sch__json_rx_fail(p, TB_ESCHEMA, "numbers out of order in {} quantifier");
        return false;
    }
    if (a > RX_MAX_COUNT || (b != RX_INF && b > RX_MAX_COUNT)) {
        sch__json_rx_fail(p, TB_EUNSUPPORTED, "repetition count above %d", RX_MAX_COUNT);
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
            sch__json_rx_fail(p, TB_EUNSUPPORTED, "groups nested deeper than %d", RX_MAX_NEST);
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
                    sch__json_rx_fail(p, TB_ESCHEMA, "invalid group name");
                    return -1;
                }
                p->i = j + 1;
            } else {
                sch__json_rx_fail(p, TB_ESCHEMA, "invalid group syntax (?%c", rest ? q[0] : ' ');
                return -1;
            }
        }
        int32_t inner = parse_disjunction(p, depth + 1);
        if (p->rc) return -1;
        if (p->i >= p->n || p->s[p->i] != ')') {
            sch__json_rx_fail(p, TB_ESCHEMA, "missing )");
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
            if (e.kind == ESC_SET) sch__json_rx_tmp_add_set(p, e.set, e.nset, e.complement);
            else if (!e.complement) cats = e.mask;
            else { notcats = e.mask; has_not = true; }
            atom = ast_new(p, A_CLASS);
            p->ast[atom].cls = sch__json_rx_class_finish(p, false, cats, notcats, has_not);
        }
    } else if (c == '*' || c == '+' || c == '?' || (c == '{' && is_quantifier_start(p))) {
        if (!p->rc) sch__json_rx_fail(p, TB_ESCHEMA, "nothing to repeat");
        return -1;
    } else {
        /* a literal, including Annex B's lone ']', '}' and non-quantifier '{' */
        atom = ast_new(p, A_CHAR);
        uint32_t cp;
        p->i += sch__json_rx_utf8((const unsigned char *)p->s + p->i, p->n - p->i, &cp);
        p->ast[atom].cp = cp;
    }
    if (atom < 0 || p->rc) return -1;

    if (!is_quantifier_start(p)) return atom;
    if (p->rc) return -1;
    if (!quantifiable) {
        sch__json_rx_fail(p, TB_ESCHEMA, "nothing to repeat (assertion)");
        return -1;
    }
    uint32_t min, max;
    char q = p->s[p->i];
    if (q == '*') { min = 0; max = RX_INF; p->i++; }
    else if (q == '+') { min = 1; max = RX_INF; p->i++; }
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
        sch__json_rx_fail(p, TB_ESCHEMA, "nothing to repeat (double quantifier)");
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

int32_t sch__json_rx_parse(rx_parse_t *p)
{
    int32_t root = parse_disjunction(p, 0);
    if (!p->rc && p->i < p->n) sch__json_rx_fail(p, TB_ESCHEMA, "unmatched )");
    return p->rc ? -1 : root;
}
