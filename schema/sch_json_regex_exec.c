/*
 * sch_json_regex_exec.c: runs a compiled pattern over a UTF-8 string.
 *
 * A backtracking matcher with an explicit stack (no recursion per
 * character, so a long string cannot exhaust the C stack) and a memo of
 * (SPLIT, position) pairs already explored. JSON Schema only asks "is there
 * a match anywhere", not where or with which captures, so a state reached
 * twice can only fail the second time: the memo turns the classic
 * exponential blow-up of (a*)*b into at most splits x (length + 1) state
 * expansions, and it also ends loops whose body matches the empty string.
 *
 * Lookaround results depend only on the position, so each (look, position)
 * is computed once and cached. A successful lookahead sub-run leaves memo
 * bits on its success path that do not mean "fails from here", so it clears
 * the memo range of its own sub-program; a lookbehind sub-run must end at a
 * given position, so its memo is cleared after every run.
 *
 * Bounds: the memo needs splits x (length + 1) bits; past RX_MEMO_MAX_BITS,
 * past RX_STEP_BUDGET steps or RX_STACK_MAX pending threads, the search gives up with TB_EFULL, which the
 * validator reports as a failed (not a passed) pattern check.
 */
#include "schema/sch_json.h"
#include "schema/sch_json_regex.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define RX_MEMO_MAX_BITS (32u * 1024 * 1024)
#define RX_STEP_BUDGET   (10u * 1000 * 1000)

#define RX_STACK_MAX     (1u << 22)   /* pending threads, 8 bytes each */

typedef struct {
    uint32_t pc;
    uint32_t sp;
} rx_thread_t;

typedef struct {
    const sch__json_regex_t *re;
    const unsigned char *s;
    size_t n;
    uint8_t *memo;          /* bit (split * (n + 1) + sp) */
    uint8_t *looks;         /* (look * (n + 1) + sp): 0 unknown, 1 true, 2 false */
    rx_thread_t *stack;
    size_t top, cap;
    uint64_t steps;
    bool over;
} rx_m_t;

/* Start of the code point that ends just before sp. */
static size_t prev_cp(const unsigned char *s, size_t sp)
{
    size_t k = sp - 1;
    while (k > 0 && sp - k < 4 && (s[k] & 0xc0) == 0x80) k--;
    return k;
}

static bool is_word(const rx_m_t *m, size_t sp)
{
    if (sp >= m->n) return false;
    unsigned c = m->s[sp];
    return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

static bool at_word_boundary(const rx_m_t *m, size_t sp)
{
    bool before = sp > 0 && is_word(m, prev_cp(m->s, sp));
    return before != is_word(m, sp);
}

static void push(rx_m_t *m, uint32_t pc, size_t sp)
{
    if (m->top >= RX_STACK_MAX) {
        m->over = true;
        return;
    }
    if (m->top == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->stack = tb_realloc(m->stack, m->cap * sizeof *m->stack);
    }
    m->stack[m->top++] = (rx_thread_t){ pc, (uint32_t)sp };
}

static void memo_clear(rx_m_t *m, uint32_t s0, uint32_t s1)
{
    if (s1 <= s0) return;
    size_t b0 = (size_t)s0 * (m->n + 1), b1 = (size_t)s1 * (m->n + 1);
    for (size_t b = b0; b < b1; b++) m->memo[b >> 3] &= (uint8_t)~(1u << (b & 7));
}

static bool look(rx_m_t *m, uint32_t pc, size_t sp);

/* Runs from (pc0, sp0) until MATCH; with want_end set, MATCH counts only
 * at position `end`. */
static bool run(rx_m_t *m, uint32_t pc0, size_t sp0, bool want_end, size_t end)
{
    const rx_inst_t *prog = m->re->prog;
    size_t base = m->top;
    push(m, pc0, sp0);
    while (m->top > base) {
        rx_thread_t t = m->stack[--m->top];
        uint32_t pc = t.pc;
        size_t sp = t.sp;
        for (;;) {
            if (++m->steps > RX_STEP_BUDGET) {
                m->over = true;
                m->top = base;
                return false;
            }
            const rx_inst_t *in = &prog[pc];
            uint32_t cp;
            size_t len;
            switch ((rx_op_t)in->op) {
            case RX_CHAR:
                if (sp >= m->n) goto dead;
                len = sch__json_rx_utf8(m->s + sp, m->n - sp, &cp);
                if (cp != in->a) goto dead;
                sp += len;
                pc++;
                continue;
            case RX_ANY:
                if (sp >= m->n) goto dead;
                len = sch__json_rx_utf8(m->s + sp, m->n - sp, &cp);
                if (cp == '\n' || cp == '\r' || cp == 0x2028 || cp == 0x2029) goto dead;
                sp += len;
                pc++;
                continue;
            case RX_CLASS:
                if (sp >= m->n) goto dead;
                len = sch__json_rx_utf8(m->s + sp, m->n - sp, &cp);
                if (!sch__json_rx_class_match(&m->re->cls[in->a], cp)) goto dead;
                sp += len;
                pc++;
                continue;
            case RX_SPLIT: {
                size_t bit = (size_t)in->c * (m->n + 1) + sp;
                if (m->memo[bit >> 3] & (1u << (bit & 7))) goto dead;
                m->memo[bit >> 3] |= (uint8_t)(1u << (bit & 7));
                push(m, in->b, sp);
                if (m->over) goto dead;
                pc = in->a;
                continue;
            }
            case RX_JMP:
                pc = in->a;
                continue;
            case RX_BOL:
                if (sp != 0) goto dead;
                pc++;
                continue;
            case RX_EOL:
                if (sp != m->n) goto dead;
                pc++;
                continue;
            case RX_WORDB:
            case RX_NWORDB:
                if (at_word_boundary(m, sp) != (in->op == RX_WORDB)) goto dead;
                pc++;
                continue;
            case RX_LOOK:
                if (!look(m, pc, sp)) goto dead;
                pc = in->b;
                continue;
            case RX_MATCH:
                if (want_end && sp != end) goto dead;
                m->top = base;
                return true;
            }
        dead:
            break;
        }
        if (m->over) {
            m->top = base;
            return false;
        }
    }
    return false;
}

static bool look(rx_m_t *m, uint32_t pc, size_t sp)
{
    const rx_inst_t *in = &m->re->prog[pc];
    uint8_t *cache = &m->looks[(size_t)in->c * (m->n + 1) + sp];
    if (*cache) return *cache == 1;
    bool r = false;
    if (!(in->flags & RX_LOOK_BEHIND)) {
        r = run(m, pc + 1, sp, false, 0);
        if (r) memo_clear(m, in->d, in->e);
    } else {
        /* some start j <= sp from which the sub-pattern ends exactly at sp */
        size_t j = sp;
        for (;;) {
            r = run(m, pc + 1, j, true, sp);
            memo_clear(m, in->d, in->e);
            if (r || m->over || j == 0) break;
            j = prev_cp(m->s, j);
        }
    }
    if (m->over) return false;
    if (in->flags & RX_LOOK_NEG) r = !r;
    *cache = r ? 1 : 2;
    return r;
}

int sch__json_regex_search(const sch__json_regex_t *re, const char *s, size_t len)
{
    rx_m_t m = { .re = re, .s = (const unsigned char *)s, .n = len };
    if (len >= UINT32_MAX) return TB_EFULL;
    size_t memo_bits = re->nsplits * (len + 1);
    if (re->nsplits && memo_bits / re->nsplits != len + 1) return TB_EFULL;
    if (memo_bits > RX_MEMO_MAX_BITS) return TB_EFULL;
    size_t look_bytes = re->nlooks * (len + 1);
    if (look_bytes > RX_MEMO_MAX_BITS / 8) return TB_EFULL;

    /* most patterns on most strings fit on the stack */
    uint8_t small_memo[256], small_looks[256];
    size_t memo_bytes = (memo_bits + 7) / 8;
    m.memo = memo_bytes <= sizeof small_memo ? small_memo : tb_malloc(memo_bytes);
    memset(m.memo, 0, memo_bytes);
    m.looks = look_bytes <= sizeof small_looks ? small_looks : tb_malloc(look_bytes);
    memset(m.looks, 0, look_bytes);

    bool found = false;
    size_t sp = 0;
    for (;;) {
        found = run(&m, 0, sp, false, 0);
        if (found || m.over || re->anchored || sp >= len) break;
        uint32_t cp;
        sp += sch__json_rx_utf8(m.s + sp, len - sp, &cp);
    }
    if (m.memo != small_memo) free(m.memo);
    if (m.looks != small_looks) free(m.looks);
    free(m.stack);
    if (m.over) return TB_EFULL;
    return found ? 1 : 0;
}
