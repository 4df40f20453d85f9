/*
 * sch_json_regex.c: compiles JSON Schema "pattern" regexes (ECMA-262):
 * character classes and code generation; the syntax is in
 * sch_json_regex_parse.c, the matcher in sch_json_regex_exec.c.
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

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* ---- character classes -------------------------------------------------- */

void sch__json_rx_tmp_add(rx_parse_t *p, uint32_t lo, uint32_t hi)
{
    if (p->ntmp == p->captmp) {
        p->captmp = p->captmp ? p->captmp * 2 : 16;
        p->tmp = tb_realloc(p->tmp, p->captmp * sizeof *p->tmp);
    }
    p->tmp[p->ntmp++] = (rx_range_t){ lo, hi };
}

/* Adds a sorted range set, or its complement over [0, 0x10FFFF]. */
void sch__json_rx_tmp_add_set(rx_parse_t *p, const rx_range_t *r, size_t n, bool complement)
{
    if (!complement) {
        for (size_t i = 0; i < n; i++) sch__json_rx_tmp_add(p, r[i].lo, r[i].hi);
        return;
    }
    uint32_t next = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo > next) sch__json_rx_tmp_add(p, next, r[i].lo - 1);
        next = r[i].hi + 1;
    }
    if (next <= 0x10ffff) sch__json_rx_tmp_add(p, next, 0x10ffff);
}

static int range_cmp(const void *a, const void *b)
{
    const rx_range_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Turns the ranges collected in p->tmp into a class; returns its index. */
int32_t sch__json_rx_class_finish(rx_parse_t *p, bool neg, uint32_t cats, uint32_t notcats, bool has_notcats)
{
    if (p->ntmp) qsort(p->tmp, p->ntmp, sizeof *p->tmp, range_cmp);
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
    if (o) memcpy(c->r, p->tmp, o * sizeof *c->r);
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
        sch__json_rx_fail(p, TB_EUNSUPPORTED, "pattern expands to more than %d instructions", RX_MAX_PROG);
        return;
    }
    const rx_ast_t *a = &p->ast[n];
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
        if (max == RX_INF) {
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
    const rx_ast_t *a = &p->ast[n];
    if (a->type == A_ASSERT) return a->akind == RX_BOL;
    if (a->type == A_CAT) return a->child >= 0 && starts_anchored(p, a->child);
    return false;
}

int sch__json_regex_compile(const char *src, size_t len, sch__json_regex_t **out, char *err, size_t errlen)
{
    *out = NULL;
    rx_parse_t p = { .s = src, .n = len, .err = err, .errlen = errlen };
    int32_t root = sch__json_rx_parse(&p);
    if (!p.rc) {
        gen(&p, root);
        emit(&p, RX_MATCH, 0, 0);
        if (!p.rc && p.nprog > RX_MAX_PROG)
            sch__json_rx_fail(&p, TB_EUNSUPPORTED, "pattern expands to more than %d instructions", RX_MAX_PROG);
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
