/*
 * test_json_regex.c: the ECMA-262 dialect of JSON Schema patterns as our
 * engine runs it (schema/sch_json_regex*.c): what matches, what is a
 * syntax error, what is refused as unsupported, and that work stays bounded.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "schema/sch_json.h"

/* 1 match, 0 no match; fails the test if the pattern does not compile. */
static int search(const char *pattern, const char *s)
{
    sch__json_regex_t *re;
    char err[160];
    int rc = sch__json_regex_compile(pattern, strlen(pattern), &re, err, sizeof err);
    cr_assert_eq(rc, 0, "pattern %s: %s", pattern, err);
    int r = sch__json_regex_search(re, s, strlen(s));
    sch__json_regex_free(re);
    return r;
}

static int compile_rc(const char *pattern)
{
    sch__json_regex_t *re;
    int rc = sch__json_regex_compile(pattern, strlen(pattern), &re, NULL, 0);
    sch__json_regex_free(re);
    return rc;
}

Test(json_regex, search_is_unanchored)
{
    cr_assert_eq(search("b+c", "aabbbcd"), 1);
}

Test(json_regex, anchors_bind_to_string_ends)
{
    cr_assert_eq(search("^abc$", "xabc"), 0);
}

Test(json_regex, dollar_does_not_match_before_a_trailing_newline)
{
    cr_assert_eq(search("^abc$", "abc\n"), 0);
}

Test(json_regex, dot_does_not_match_a_line_terminator)
{
    cr_assert_eq(search("^a.c$", "a\nc"), 0);
}

Test(json_regex, digit_class_is_ascii_only)
{
    cr_assert_eq(search("^\\d$", "\xdf\xa0"), 0); /* U+07C0 NKO DIGIT ZERO */
}

Test(json_regex, word_class_is_ascii_only)
{
    cr_assert_eq(search("^\\w$", "\xc3\xa9"), 0); /* é */
}

Test(json_regex, space_class_includes_unicode_spaces)
{
    cr_assert_eq(search("^\\s$", "\xe2\x80\x83"), 1); /* U+2003 EM SPACE */
}

Test(json_regex, unicode_letter_property_matches_greek)
{
    cr_assert_eq(search("^\\p{Letter}+$", "\xcf\x80\xce\xb1"), 1); /* πα */
}

Test(json_regex, negated_property_excludes_letters)
{
    cr_assert_eq(search("^\\P{L}+$", "12-3"), 1);
}

Test(json_regex, decimal_number_property_matches_non_ascii_digits)
{
    cr_assert_eq(search("^\\p{Nd}+$", "\xdf\x80\x31"), 1);
}

Test(json_regex, class_ranges_and_negation)
{
    cr_assert_eq(search("^[^a-c][x-z]$", "dz"), 1);
}

Test(json_regex, counted_repetition_is_bounded_both_ways)
{
    cr_assert_eq(search("^a{2,3}$", "aaaa"), 0);
}

Test(json_regex, lazy_quantifier_still_finds_a_match)
{
    cr_assert_eq(search("^a+?b$", "aaab"), 1);
}

Test(json_regex, alternation_picks_any_branch)
{
    cr_assert_eq(search("^(cat|dog|bird)$", "bird"), 1);
}

Test(json_regex, positive_lookahead)
{
    /* at least one digit somewhere, and 6+ characters */
    cr_assert_eq(search("^(?=.*\\d).{6,}$", "abcdef"), 0);
}

Test(json_regex, negative_lookahead)
{
    cr_assert_eq(search("^(?!tmp-)[a-z-]+$", "tmp-file"), 0);
}

Test(json_regex, lookbehind_of_variable_width)
{
    cr_assert_eq(search("(?<=\\$\\d+)\\.\\d\\d$", "$12.50"), 1);
}

Test(json_regex, negative_lookbehind)
{
    cr_assert_eq(search("(?<!x)y", "xy"), 0);
}

Test(json_regex, word_boundary)
{
    cr_assert_eq(search("\\bcat\\b", "concatenate"), 0);
}

Test(json_regex, escaped_surrogate_pair_is_one_code_point)
{
    cr_assert_eq(search("^\\ud83d\\udc32$", "\xf0\x9f\x90\xb2"), 1); /* U+1F432 */
}

Test(json_regex, braced_unicode_escape)
{
    cr_assert_eq(search("^\\u{1F432}$", "\xf0\x9f\x90\xb2"), 1);
}

Test(json_regex, control_escape)
{
    cr_assert_eq(search("^\\cJ$", "\n"), 1);
}

Test(json_regex, lone_closing_bracket_is_a_literal)
{
    cr_assert_eq(search("^a]$", "a]"), 1);
}

Test(json_regex, empty_loop_body_terminates)
{
    cr_assert_eq(search("^(a*)*$", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab"), 0);
}

Test(json_regex, nested_quantifiers_stay_linear)
{
    size_t n = 20000;
    char *s = malloc(n + 2);
    memset(s, 'a', n);
    s[n] = '!';
    s[n + 1] = '\0';
    cr_assert_eq(search("^(a|aa)+$", s), 0);
    free(s);
}

Test(json_regex, unterminated_group_is_a_syntax_error)
{
    cr_assert_eq(compile_rc("(ab"), TB_ESCHEMA);
}

Test(json_regex, double_quantifier_is_a_syntax_error)
{
    cr_assert_eq(compile_rc("a**"), TB_ESCHEMA);
}

Test(json_regex, reversed_range_is_a_syntax_error)
{
    cr_assert_eq(compile_rc("[z-a]"), TB_ESCHEMA);
}

Test(json_regex, undefined_letter_escape_is_a_syntax_error)
{
    cr_assert_eq(compile_rc("\\a"), TB_ESCHEMA);
}

Test(json_regex, python_named_group_is_a_syntax_error)
{
    cr_assert_eq(compile_rc("(?P<x>a)"), TB_ESCHEMA);
}

Test(json_regex, inline_flags_are_a_syntax_error)
{
    cr_assert_eq(compile_rc("(?i)abc"), TB_ESCHEMA);
}

Test(json_regex, backreference_is_unsupported)
{
    cr_assert_eq(compile_rc("(a)\\1"), TB_EUNSUPPORTED);
}

Test(json_regex, unicode_script_property_is_unsupported)
{
    cr_assert_eq(compile_rc("\\p{Script=Greek}"), TB_EUNSUPPORTED);
}

Test(json_regex, huge_repetition_count_is_unsupported)
{
    cr_assert_eq(compile_rc("a{100000}"), TB_EUNSUPPORTED);
}

Test(json_regex, nested_expansion_beyond_program_bound_is_unsupported)
{
    cr_assert_eq(compile_rc("((a{1000}){1000}){1000}"), TB_EUNSUPPORTED);
}

Test(json_regex, group_nesting_beyond_the_bound_is_refused)
{
    char p[400];
    memset(p, '(', 150);
    memset(p + 150, ')', 150);
    p[300] = '\0';
    cr_assert_eq(compile_rc(p), TB_EUNSUPPORTED);
}

Test(json_regex, syntax_error_message_gives_the_offset)
{
    sch__json_regex_t *re;
    char err[160];
    cr_assert_eq(sch__json_regex_compile("ab\\q", 4, &re, err, sizeof err), TB_ESCHEMA);
    cr_assert_str_eq(err, "invalid escape \\q at offset 3");
}
