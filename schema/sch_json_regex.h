/*
 * sch_json_regex.h: the compiled form of a pattern, shared by the regex
 * compiler (sch_json_regex.c) and matcher (sch_json_regex_exec.c) only.
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

#endif
