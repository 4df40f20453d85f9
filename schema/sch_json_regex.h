/*
 * sch_json_regex.h: the compiled form of a pattern, shared by the regex
 * parser (sch_json_regex_parse.c), code generator (sch_json_regex.c) and
 * matcher (sch_json_regex_exec.c) only.
 *
 * A pattern compiles to a small program for a backtracking matcher (in the
 * style of Pike's and Thompson's VMs as Russ Cox describes them): CHAR, ANY,
 * CLASS consume one code point; SPLIT tries two continuations; LOOK runs a
 * sub-program that ends in MATCH. Counted repetition is expanded, so the
 * program size is bounded (RX_MAX_PROG) rather than the repetition counts.
 * Every SPLIT carries a dense index so the matcher can memoise
 * (split, position) pairs: that makes a search O(splits x length) instead of
 * exponential, which is what keeps a hostile payload from stalling the loop.
 */
#ifndef SCH_JSON_REGEX_H
#define SCH_JSON_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RX_MAX_PROG 20000   /* instructions after expanding {n,m} */
#define RX_MAX_NEST 64      /* group nesting while parsing */

typedef enum {
    RX_CHAR,   /* a: code point */
    RX_ANY,    /* any code point but a line terminator */
    RX_CLASS,  /* a: class index */
    RX_SPLIT,  /* try a, then b; c: split index */
    RX_JMP,    /* a: target */
    RX_BOL,
    RX_EOL,
    RX_WORDB,
    RX_NWORDB,
    RX_LOOK,   /* sub-program at pc+1 ending in MATCH; b: continuation;
                  c: look index; d, e: split index range of the sub-program */
    RX_MATCH,
} rx_op_t;

enum { RX_LOOK_NEG = 1, RX_LOOK_BEHIND = 2 };

typedef struct {
    uint8_t op, flags;
    uint32_t a, b, c, d, e;
} rx_inst_t;

typedef struct {
    uint32_t lo, hi;
} rx_range_t;

typedef struct {
    rx_range_t *r;       /* sorted, disjoint */
    size_t n;
    uint32_t cats;       /* \p{..}: general-category bits that match */
    uint32_t notcats;    /* \P{..}: matches when the category is NOT in this */
    bool has_notcats;
    bool neg;            /* [^...] */
} rx_class_t;

struct sch__json_regex {
    rx_inst_t *prog;
    size_t n;
    rx_class_t *cls;
    size_t ncls;
    size_t nsplits, nlooks;
    bool anchored;       /* starts with ^ on every path: try position 0 only */
};

bool sch__json_rx_class_match(const rx_class_t *c, uint32_t cp);

/* Decodes one UTF-8 code point of s[0..n), n > 0; a byte that does not
 * start a well-formed sequence stands for itself (jansson has already
 * rejected invalid UTF-8 in JSON strings, so this is only a safeguard). */
static inline size_t sch__json_rx_utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n) {
        *cp = c;
        return 1;
    }
    uint32_t v = len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
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

/* ---- compiler internals (sch_json_regex.c, sch_json_regex_parse.c) ---- */

#define RX_MAX_COUNT 1000   /* largest {n,m} count */
#define RX_INF UINT32_MAX

typedef enum { A_EMPTY, A_CHAR, A_ANY, A_CLASS, A_CAT, A_ALT, A_REPEAT, A_ASSERT, A_LOOK } rx_ast_type_t;

typedef struct {
    uint8_t type, akind, flags;
    bool greedy;
    uint32_t cp;          /* A_CHAR */
    int32_t cls;          /* A_CLASS */
    int32_t child, next;  /* first child; next sibling */
    uint32_t min, max;    /* A_REPEAT */
} rx_ast_t;

typedef struct {
    const char *s;
    size_t n, i;
    int rc;               /* 0, TB_ESCHEMA or TB_EUNSUPPORTED once failed */
    char *err;
    size_t errlen;
    rx_ast_t *ast;
    size_t nast, capast;
    rx_class_t *cls;
    size_t ncls, capcls;
    rx_range_t *tmp;      /* ranges of the class being built */
    size_t ntmp, captmp;
    rx_inst_t *prog;
    size_t nprog, capprog;
} rx_parse_t;

/* Parses the whole pattern into p->ast (classes into p->cls); returns the
 * root node, or -1 with p->rc and p->err set. */
int32_t sch__json_rx_parse(rx_parse_t *p);
/* Records the first error, with the pattern offset appended. */
void sch__json_rx_fail(rx_parse_t *p, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Class building: ranges collect in p->tmp, class_finish sorts, merges and
 * stores them as a class and returns its index. */
void sch__json_rx_tmp_add(rx_parse_t *p, uint32_t lo, uint32_t hi);
void sch__json_rx_tmp_add_set(rx_parse_t *p, const rx_range_t *r, size_t n, bool complement);
int32_t sch__json_rx_class_finish(rx_parse_t *p, bool neg, uint32_t cats, uint32_t notcats, bool has_notcats);

#endif
