/*
 * test_json_equal.c: JSON Schema's equality and number comparison
 * (schema/sch_json_equal.c), where jansson's own json_equal differs.
 */
#include <criterion/criterion.h>

#include "schema/sch_json.h"

static bool eq(const char *a, const char *b)
{
    json_t *x = json_loads(a, JSON_DECODE_ANY, NULL), *y = json_loads(b, JSON_DECODE_ANY, NULL);
    bool deep = false;
    bool r = sch__json_equal(x, y, &deep);
    cr_assert_not(deep);
    json_decref(x);
    json_decref(y);
    return r;
}

Test(json_equal, integer_equals_integral_real)
{
    cr_assert(eq("[1, {\"a\": 2}]", "[1.0, {\"a\": 2.0}]"));
}

Test(json_equal, object_key_order_does_not_matter)
{
    cr_assert(eq("{\"a\":1,\"b\":[true,null]}", "{\"b\":[true,null],\"a\":1}"));
}

Test(json_equal, array_order_matters)
{
    cr_assert_not(eq("[1,2]", "[2,1]"));
}

Test(json_equal, false_is_not_zero)
{
    cr_assert_not(eq("false", "0"));
}

Test(json_equal, large_integer_is_not_rounded_through_double)
{
    /* 2^53 + 1 differs from the double 2^53, though (double)(2^53 + 1) == 2^53 */
    cr_assert_not(eq("9007199254740993", "9007199254740992.0"));
}

Test(json_equal, number_compare_is_exact_across_representations)
{
    sch__json_num_t i = { .is_int = true, .i = 9007199254740993 }, d = { .d = 9007199254740992.0 };
    cr_assert_gt(sch__json_num_cmp(i, d), 0);
}

Test(json_equal, uniqueness_hash_agrees_with_equality)
{
    json_t *a = json_loads("[{\"a\":1,\"b\":2},3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,{\"b\":2.0,\"a\":1.0}]", 0, NULL);
    size_t i, j;
    bool deep = false;
    cr_assert_not(sch__json_unique(a, &i, &j, &deep));
    cr_assert_eq(i, 0);
    cr_assert_eq(j, 16);
    json_decref(a);
}
