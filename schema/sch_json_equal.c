/*
 * sch_json_equal.c: JSON numbers and JSON equality, as JSON Schema means them.
 *
 * jansson keeps integers (json_int_t, int64) and reals (double) apart and its
 * json_equal() says 1 != 1.0; JSON Schema says they are the same number. So
 * numbers are compared here exactly across the two representations (no
 * rounding of a large int64 through double), and enum, const and uniqueItems
 * use sch__json_equal() instead of json_equal().
 *
 * Integer semantics: a number is an integer when it has no fractional part,
 * whatever its spelling (1, 1.0, 1e2). Integers beyond int64 reach us as
 * doubles (the payload parser retries with JSON_DECODE_INT_AS_REAL), and a
 * double that large is always integral.
 *
 * multipleOf on doubles divides and accepts a quotient within 4 ULPs of an
 * integer, because the decimal operands ("19.99", "0.01") were rounded to
 * binary before we saw them; the cost is that a double a few ULPs away from
 * a true multiple also passes.
 *
 * uniqueItems hashes the items (a hash consistent with the equality, so
 * 1 and 1.0 hash alike and key order does not matter) and compares only
 * items whose hashes collide, so a 100k-item array costs O(n log n) rather
 * than O(n^2) comparisons.
 */
#include "schema/sch_json.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

sch__json_num_t sch__json_num(const json_t *v)
{
    sch__json_num_t n = { 0 };
    if (json_is_integer(v)) {
        n.is_int = true;
        n.i = (int64_t)json_integer_value(v);
        n.d = (double)n.i;
    } else {
        n.d = json_real_value(v);
    }
    return n;
}

/* Exact comparison of an int64 with a finite double. */
static int cmp_int_double(int64_t i, double d)
{
    if (d >= 9223372036854775808.0) return -1;
    if (d < -9223372036854775808.0) return 1;
    int64_t t = (int64_t)d; /* truncates toward zero; exact in this range */
    if (i < t) return -1;
    if (i > t) return 1;
    double frac = d - (double)t;
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

int sch__json_num_cmp(sch__json_num_t a, sch__json_num_t b)
{
    if (a.is_int && b.is_int) return a.i < b.i ? -1 : a.i > b.i;
    if (a.is_int) return cmp_int_double(a.i, b.d);
    if (b.is_int) return -cmp_int_double(b.i, a.d);
    return a.d < b.d ? -1 : a.d > b.d;
}

bool sch__json_num_is_integral(sch__json_num_t a)
{
    return a.is_int || (isfinite(a.d) && a.d == floor(a.d));
}

bool sch__json_num_multiple_of(sch__json_num_t x, sch__json_num_t m)
{
    if (x.is_int && m.is_int) return m.i != 0 && x.i % m.i == 0;
    double q = x.d / m.d;
    if (isfinite(q)) {
        /* 19.99 / 0.01 is 1998.9999999999998 in binary floating point: both
         * operands were rounded from decimal and the division rounds again,
         * so a quotient within a few ULPs of an integer is that integer. */
        double r = nearbyint(q);
        return q == r || fabs(q - r) <= 4 * DBL_EPSILON * fabs(q);
    }
    /* The quotient overflowed (1e308 / 0.5): fall back to the exact
     * floating remainder, which is 0 only for a true multiple. */
    return fmod(x.d, m.d) == 0.0;
}

void sch__json_num_format(sch__json_num_t a, char *buf, size_t len)
{
    if (a.is_int) {
        snprintf(buf, len, "%lld", (long long)a.i);
        return;
    }
    snprintf(buf, len, "%.15g", a.d);
    if (strtod(buf, NULL) != a.d) snprintf(buf, len, "%.17g", a.d);
}

static bool equal_at(const json_t *a, const json_t *b, unsigned depth, bool *too_deep)
{
    if (depth > SCH_JSON_MAX_INST_DEPTH) {
        *too_deep = true;
        return false;
    }
    if (json_is_number(a) && json_is_number(b))
        return sch__json_num_cmp(sch__json_num(a), sch__json_num(b)) == 0;
    if (json_typeof(a) != json_typeof(b)) return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY: {
        size_t n = json_array_size(a);
        if (n != json_array_size(b)) return false;
        for (size_t i = 0; i < n; i++)
            if (!equal_at(json_array_get(a, i), json_array_get(b, i), depth + 1, too_deep))
                return false;
        return true;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b)) return false;
        for (void *it = json_object_iter((json_t *)a); it; it = json_object_iter_next((json_t *)a, it)) {
            const json_t *bv = json_object_getn(b, json_object_iter_key(it), json_object_iter_key_len(it));
            if (!bv || !equal_at(json_object_iter_value(it), bv, depth + 1, too_deep)) return false;
        }
        return true;
    }
    default: /* true, false, null: same type is enough */
        return true;
    }
}

bool sch__json_equal(const json_t *a, const json_t *b, bool *too_deep)
{
    return equal_at(a, b, 0, too_deep);
}

/* ---- hashing consistent with sch__json_equal --------------------------- */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static uint64_t hash_bytes(const char *s, size_t n, uint64_t seed)
{
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return mix(h);
}

static uint64_t hash_at(const json_t *v, uint64_t seed, unsigned depth, bool *too_deep)
{
    if (depth > SCH_JSON_MAX_INST_DEPTH) {
        *too_deep = true;
        return 0;
    }
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        return mix((uint64_t)json_integer_value(v) ^ seed);
    case JSON_REAL: {
        double d = json_real_value(v);
        /* an integral double in int64 range must hash like the integer */
        if (d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            return mix((uint64_t)(int64_t)d ^ seed);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return mix(bits ^ seed ^ 0x2222);
    }
    case JSON_STRING:
        return hash_bytes(json_string_value(v), json_string_length(v), seed ^ 0x3333);
    case JSON_ARRAY: {
        uint64_t h = 0x4444;
        for (size_t i = 0; i < json_array_size(v); i++)
            h = mix(h ^ hash_at(json_array_get(v, i), seed, depth + 1, too_deep));
        return h;
    }
    case JSON_OBJECT: {
        uint64_t h = 0x5555; /* sum: independent of key order */
        for (void *it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it)) {
            uint64_t k = hash_bytes(json_object_iter_key(it), json_object_iter_key_len(it), seed ^ 0x6666);
            h += mix(k ^ hash_at(json_object_iter_value(it), seed, depth + 1, too_deep));
        }
        return mix(h);
    }
    case JSON_TRUE: return 0x7777;
    case JSON_FALSE: return 0x8888;
    default: return 0x9999;
    }
}

typedef struct {
    uint64_t h;
    size_t i;
} hashed_t;

static int hashed_cmp(const void *a, const void *b)
{
    const hashed_t *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

bool sch__json_unique(const json_t *array, size_t *di, size_t *dj, bool *too_deep)
{
    size_t n = json_array_size(array);
    if (n <= 16) { /* small: pairwise, no allocation */
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (sch__json_equal(json_array_get(array, i), json_array_get(array, j), too_deep)) {
                    *di = i;
                    *dj = j;
                    return false;
                }
        return true;
    }
    /* seeded from heap and stack addresses (ASLR): a sender cannot aim a
     * payload full of colliding items at a hash it cannot predict */
    uint64_t seed = mix((uint64_t)(uintptr_t)array ^ ((uint64_t)(uintptr_t)&n << 17));
    hashed_t *hs = tb_malloc(n * sizeof *hs);
    for (size_t i = 0; i < n; i++) hs[i] = (hashed_t){ hash_at(json_array_get(array, i), seed, 0, too_deep), i };
    qsort(hs, n, sizeof *hs, hashed_cmp);
    bool unique = true;
    for (size_t a = 0; a < n && unique && !*too_deep; a++) {
        for (size_t b = a + 1; b < n && hs[b].h == hs[a].h; b++) {
            if (sch__json_equal(json_array_get(array, hs[a].i), json_array_get(array, hs[b].i), too_deep)) {
                *di = hs[a].i;
                *dj = hs[b].i;
                unique = false;
                break;
            }
        }
    }
    free(hs);
    return unique;
}
