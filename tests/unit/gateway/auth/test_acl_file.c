/*
 * test_acl_file.c: Mosquitto's acl_file, read as Mosquitto 2 reads it
 * (sections, patterns, access words, errors naming their line), and the
 * answers the broker gets: tests/data/auth/acl is the file mosquitto 2.0.11
 * ran with, and its comments say what mosquitto did; where we refuse more
 * (a deny wins everywhere, no value spans levels) the test says so.
 */
#include "helper_auth.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define R AUTH_ACL_READ
#define W AUTH_ACL_WRITE

/* ---- the vendored file ------------------------------------------------------ */

static auth_acl_t *vendored(void)
{
    auth_acl_t *a = NULL;
    auth_error_t err = { { 0 }, 0 };
    cr_assert_eq(auth_acl_load(auth_testdata("acl"), &a, &err), 0, "%s", err.msg);
    return a;
}

Test(acl_file, vendored_file_loads)
{
    auth_acl_t *a = vendored();
    cr_assert_eq(auth_acl_rules(a), 7);
    auth_acl_unref(a);
}

Test(acl_file, anonymous_lines_before_the_first_user)
{
    auth_acl_t *a = vendored();
    cr_assert(acl_may(a, NULL, "anon1", "data/x", R));
    cr_assert(!acl_may(a, NULL, "anon1", "data/x", W), "read only");
    cr_assert(!acl_may(a, NULL, "anon1", "$SYS/broker/version", R), "'#' does not give $SYS");
    /* a named user with no section of its own does not get the anonymous lines */
    cr_assert(!acl_may(a, "zed", "z1", "data/x", R));
    auth_acl_unref(a);
}

Test(acl_file, user_sections)
{
    auth_acl_t *a = vendored();
    cr_assert(acl_may(a, "alice", "a1", "any/thing", R));
    cr_assert(acl_may(a, "alice", "a1", "any/thing", W));
    cr_assert(!acl_may(a, "alice", "a1", "$SYS/broker/version", R), "'#' does not give $SYS");
    cr_assert(acl_may(a, "bob", "b1", "data/x", W));
    cr_assert(!acl_may(a, "bob", "b1", "other/x", R), "bob's section is data/# only");
    cr_assert(acl_may(a, "carol", "c1", "$SYS/broker/version", R), "written-out $SYS filter");
    cr_assert(!acl_may(a, "carol", "c1", "$SYS/broker/version", W));
    auth_acl_unref(a);
}

Test(acl_file, deny_pattern_beats_a_section_grant)
{
    auth_acl_t *a = vendored();
    /* mosquitto 2.0.11 let bob publish this: his section is checked first. */
    cr_assert(!acl_may(a, "bob", "b1", "data/bob/secret", W));
    cr_assert(!acl_may(a, "bob", "b1", "data/bob/secret", R));
    cr_assert(acl_may(a, "bob", "b1", "data/alice/secret", W), "%%u is bob");
    auth_acl_unref(a);
}

Test(acl_file, patterns_with_user_and_client_id)
{
    auth_acl_t *a = vendored();
    cr_assert(acl_may(a, "carol", "c1", "dev/carol/1", W));
    cr_assert(!acl_may(a, "carol", "c1", "dev/carol/1", R), "pattern write only");
    cr_assert(!acl_may(a, "carol", "c1", "dev/bob/1", W));
    cr_assert(acl_may(a, "carol", "qq", "cid/qq/x", W));
    cr_assert(!acl_may(a, "carol", "qq", "cid/qq/x/y", W));
    cr_assert(acl_may(a, NULL, "qq", "cid/qq/x", W), "patterns are every client's, anonymous too");
    cr_assert(!acl_may(a, NULL, "qq", "dev/qq/1", W), "no user name: no %%u pattern");
    auth_acl_unref(a);
}

Test(acl_file, dangerous_names_do_not_widen_patterns)
{
    auth_acl_t *a = vendored();
    cr_assert(!acl_may(a, "+", "p1", "dev/alice/1", W), "mosquitto: dangerous username");
    cr_assert(!acl_may(a, "#", "p1", "dev/alice/1", W));
    cr_assert(!acl_may(a, "a/b", "s1", "dev/a/b/1", W), "mosquitto 2.0.11 allowed this one");
    cr_assert(!acl_may(a, "carol", "q/r", "cid/q/r/x", W), "client id spanning levels");
    cr_assert(!acl_may(a, "carol", "+", "cid/qq/x", W));
    auth_acl_unref(a);
}

/* ---- the file format -------------------------------------------------------- */

Test(acl_format, access_words_and_the_readwrite_default)
{
    auth_acl_t *a = acl_ok("topic rw/default\n"
                           "topic read r/x\n"
                           "topic write w/x\n"
                           "topic readwrite both/x\n");
    cr_assert(acl_may(a, NULL, "c", "rw/default", R) && acl_may(a, NULL, "c", "rw/default", W));
    cr_assert(acl_may(a, NULL, "c", "r/x", R) && !acl_may(a, NULL, "c", "r/x", W));
    cr_assert(!acl_may(a, NULL, "c", "w/x", R) && acl_may(a, NULL, "c", "w/x", W));
    cr_assert(acl_may(a, NULL, "c", "both/x", R) && acl_may(a, NULL, "c", "both/x", W));
    cr_assert(!acl_may(a, NULL, "c", "r/x", (auth_access_t)(R | W)), "both asked: both needed");
    cr_assert(acl_may(a, NULL, "c", "both/x", (auth_access_t)(R | W)));
    auth_acl_unref(a);
}

Test(acl_format, a_lone_word_is_the_topic_and_topics_may_hold_spaces)
{
    auth_acl_t *a = acl_ok("topic read\n"
                           "topic write my topic/with  spaces\n");
    cr_assert(acl_may(a, NULL, "c", "read", R) && acl_may(a, NULL, "c", "read", W), "\"read\" is the topic");
    cr_assert(acl_may(a, NULL, "c", "my topic/with  spaces", W));
    cr_assert(!acl_may(a, NULL, "c", "my topic/with spaces", W));
    auth_acl_unref(a);
}

Test(acl_format, comments_blank_lines_crlf_and_blanks)
{
    auth_acl_t *a = acl_ok("# the anonymous section\r\n"
                           "\r\n"
                           "   # indented comment\r\n"
                           "  topic   read   a/b  \r\n"
                           "user\tJohn Smith \r\n"
                           "\ttopic write j/x\r\n");
    cr_assert_eq(auth_acl_rules(a), 2);
    cr_assert(acl_may(a, NULL, "c", "a/b", R), "CR and blanks dropped");
    cr_assert(acl_may(a, "John Smith", "c", "j/x", W), "a user name with a space");
    cr_assert(!acl_may(a, "John", "c", "j/x", W));
    auth_acl_unref(a);
}

Test(acl_format, a_user_named_twice_has_both_sections)
{
    auth_acl_t *a = acl_ok("user u\ntopic read one\nuser v\ntopic read two\nuser u\ntopic read three\n");
    cr_assert(acl_may(a, "u", "c", "one", R));
    cr_assert(acl_may(a, "u", "c", "three", R));
    cr_assert(!acl_may(a, "u", "c", "two", R));
    cr_assert(acl_may(a, "v", "c", "two", R));
    auth_acl_unref(a);
}

Test(acl_format, a_user_with_no_rules_gets_nothing)
{
    auth_acl_t *a = acl_ok("topic #\nuser empty\nuser full\ntopic #\n");
    cr_assert(!acl_may(a, "empty", "c", "x", R));
    cr_assert(!acl_may(a, "empty", "c", "x", W));
    cr_assert(!acl_may(a, "stranger", "c", "x", R), "not in the file at all");
    cr_assert(acl_may(a, "full", "c", "x", R));
    cr_assert(acl_may(a, NULL, "c", "x", R));
    auth_acl_unref(a);
}

Test(acl_format, an_empty_file_denies_everything)
{
    auth_acl_t *a = acl_ok("# nothing\n");
    cr_assert_eq(auth_acl_rules(a), 0);
    cr_assert(!acl_may(a, NULL, "c", "x", R));
    cr_assert(!acl_may(a, "u", "c", "x", W));
    auth_acl_unref(a);
    cr_assert(!acl_may(NULL, "u", "c", "x", W));
}

/* ---- deny ------------------------------------------------------------------- */

Test(acl_deny, deny_wins_in_either_order)
{
    auth_acl_t *a = acl_ok("topic readwrite a/#\ntopic deny a/secret\n"
                           "user u\ntopic deny b/secret\ntopic readwrite b/#\n");
    cr_assert(!acl_may(a, NULL, "c", "a/secret", R));
    cr_assert(!acl_may(a, NULL, "c", "a/secret", W));
    cr_assert(acl_may(a, NULL, "c", "a/public", R));
    cr_assert(!acl_may(a, "u", "c", "b/secret", W));
    cr_assert(acl_may(a, "u", "c", "b/secret/deeper", W), "deny b/secret is that topic only");
    auth_acl_unref(a);
}

Test(acl_deny, a_section_deny_beats_a_pattern_grant)
{
    auth_acl_t *a = acl_ok("user u\ntopic deny home/u/locked\npattern readwrite home/%u/#\n");
    cr_assert(acl_may(a, "u", "c", "home/u/open", W));
    cr_assert(!acl_may(a, "u", "c", "home/u/locked", W));
    auth_acl_unref(a);
}

Test(acl_deny, a_deny_pattern_without_substitution_is_every_clients)
{
    auth_acl_t *a = acl_ok("topic readwrite #\nuser u\ntopic readwrite #\npattern deny admin/#\n");
    cr_assert(!acl_may(a, NULL, "c", "admin/x", R));
    cr_assert(!acl_may(a, "u", "c", "admin", W), "admin/# holds admin");
    cr_assert(acl_may(a, "u", "c", "other", W));
    auth_acl_unref(a);
}

/* ---- filters ---------------------------------------------------------------- */

Test(acl_filters, hash_and_plus)
{
    auth_acl_t *a = acl_ok("topic read a/#\ntopic read b/+\ntopic read +/c/+\ntopic read d/+/e\n");
    cr_assert(acl_may(a, NULL, "c", "a", R), "a/# holds its parent");
    cr_assert(acl_may(a, NULL, "c", "a/x/y/z", R));
    cr_assert(!acl_may(a, NULL, "c", "ab", R));
    cr_assert(acl_may(a, NULL, "c", "b/x", R));
    cr_assert(acl_may(a, NULL, "c", "b/", R), "'+' matches an empty level");
    cr_assert(!acl_may(a, NULL, "c", "b", R), "b/+ does not hold b");
    cr_assert(!acl_may(a, NULL, "c", "b/x/y", R));
    cr_assert(acl_may(a, NULL, "c", "/c/x", R), "an empty first level");
    cr_assert(acl_may(a, NULL, "c", "d/anything/e", R));
    cr_assert(!acl_may(a, NULL, "c", "d/e", R));
    auth_acl_unref(a);
}

Test(acl_filters, dollar_topics_need_a_written_out_first_level)
{
    auth_acl_t *a = acl_ok("topic read #\ntopic read +/x\n"
                           "user sys\ntopic read $SYS/#\ntopic read $SYS/+/version\ntopic write $share-like/+\n");
    cr_assert(!acl_may(a, NULL, "c", "$SYS/broker/version", R), "'#' never gives $SYS");
    cr_assert(!acl_may(a, NULL, "c", "$SYS", R));
    cr_assert(!acl_may(a, NULL, "c", "$x/x", R), "'+' as first level never matches $x");
    cr_assert(acl_may(a, NULL, "c", "y/x", R));
    cr_assert(acl_may(a, NULL, "c", "a/$b", R), "'$' past the first level is an ordinary character");
    cr_assert(acl_may(a, "sys", "c", "$SYS/broker/version", R));
    cr_assert(acl_may(a, "sys", "c", "$SYS", R), "$SYS/# holds $SYS");
    cr_assert(acl_may(a, "sys", "c", "$share-like/q", W));
    auth_acl_unref(a);
}

Test(acl_filters, wildcard_topics_and_odd_requests_are_refused)
{
    auth_acl_t *a = acl_ok("topic #\n");
    cr_assert(!acl_may(a, NULL, "c", "a/+", R), "a topic name has no wildcards");
    cr_assert(!acl_may(a, NULL, "c", "a/#", W));
    cr_assert(!acl_may(a, NULL, "c", "", R));
    cr_assert(!auth_acl_allows(a, NULL, "c", NULL, 0, R));
    cr_assert(!acl_may(a, NULL, "c", "x", (auth_access_t)0), "nothing asked, nothing given");
    cr_assert(auth_acl_allows(a, NULL, "c", "x/y-not-this", 3, R), "tlen bounds the topic");
    auth_acl_unref(a);
}

/* ---- patterns --------------------------------------------------------------- */

Test(acl_patterns, user_and_client_id_substitution)
{
    auth_acl_t *a = acl_ok("pattern readwrite dev/%u/%c/#\npattern read pre-%u-post/x\n");
    cr_assert(acl_may(a, "u", "c1", "dev/u/c1/t", W));
    cr_assert(acl_may(a, "u", "c1", "dev/u/c1", R));
    cr_assert(!acl_may(a, "u", "c1", "dev/u/c2/t", W));
    cr_assert(!acl_may(a, "u", "c1", "dev/v/c1/t", W));
    cr_assert(!acl_may(a, "u", "c1", "dev/%u/%c/t", W), "no literal %%u for a substituted pattern");
    cr_assert(acl_may(a, "bob", "c", "pre-bob-post/x", R), "inside a level, as Mosquitto 2.0 substitutes");
    cr_assert(!acl_may(a, "bob", "c", "pre-bo-post/x", R));
    auth_acl_unref(a);
}

Test(acl_patterns, no_user_name_or_empty_values_never_match)
{
    auth_acl_t *a = acl_ok("pattern read u/%u\npattern read c/%c\npattern deny never/%u\n");
    cr_assert(!acl_may(a, NULL, "c", "u/", R), "no user name: a %%u pattern is not for it");
    cr_assert(!acl_may(a, NULL, "c", "u/%u", R));
    cr_assert(!acl_may(a, "", "c", "u/", R), "an empty user name substitutes nothing");
    cr_assert(!acl_may(a, "x", "", "c/", R), "an empty client id substitutes nothing");
    cr_assert(!acl_may(a, "x", NULL, "c/", R));
    cr_assert(acl_may(a, "x", "k", "c/k", R));
    auth_acl_unref(a);
}

Test(acl_patterns, topic_lines_do_not_substitute)
{
    auth_acl_t *a = acl_ok("user u\ntopic read lit/%u\n");
    cr_assert(acl_may(a, "u", "c", "lit/%u", R));
    cr_assert(!acl_may(a, "u", "c", "lit/u", R));
    auth_acl_unref(a);
}

Test(acl_patterns, plus_in_a_user_name_does_not_widen_a_pattern)
{
    auth_acl_t *a = acl_ok("pattern read %u/#\npattern write c/%c\npattern read public/#\n"
                           "user +\ntopic read own/#\n");
    cr_assert(acl_may(a, "alice", "c", "alice/x", R));
    cr_assert(!acl_may(a, "+", "c", "alice/x", R), "'+' is no wildcard here");
    cr_assert(!acl_may(a, "#", "c", "alice/x", R));
    cr_assert(!acl_may(a, "a+b", "c", "public/x", R), "a '+' anywhere in the value: no pattern grant");
    cr_assert(!acl_may(a, "x/y", "c", "x/y/z", R), "a '/' would span levels");
    cr_assert(!acl_may(a, "ok", "+", "c/alice", W), "client id '+'");
    cr_assert(!acl_may(a, "ok", "#", "c/alice", W));
    /* As in Mosquitto 2.0: such a client gets nothing from pattern lines at all, its section stays. */
    cr_assert(!acl_may(a, "+", "c", "public/x", R));
    cr_assert(!acl_may(a, "x/y", "c", "public/x", R), "'/' counts as dangerous too");
    cr_assert(!acl_may(a, "ok", "a/b", "public/x", R), "in the client id too");
    cr_assert(acl_may(a, "+", "c", "own/x", R));
    cr_assert(acl_may(a, "ok", "c", "public/x", R));
    auth_acl_unref(a);
}

Test(acl_patterns, deny_patterns_still_apply_to_dangerous_names_when_they_can)
{
    auth_acl_t *a = acl_ok("user +\ntopic readwrite #\npattern deny %c/private\n");
    cr_assert(!acl_may(a, "+", "me", "me/private", W), "%%c is fine, the deny applies");
    cr_assert(acl_may(a, "+", "me", "me/public", W));
    auth_acl_unref(a);
}

/* ---- errors, each naming its line --------------------------------------------- */

typedef struct bad_acl {
    const char *line;
    const char *says;
} bad_acl_t;

static const bad_acl_t bad_acls[] = {
    { "topics read a", "unknown keyword \"topics\" (topic, pattern or user)" },
    { "Topic read a", "unknown keyword \"Topic\"" },
    { "# fine\n#x\nuserx", "unknown keyword" },
    { "topic", "`topic` line: no topic" },
    { "pattern", "`pattern` line: no topic" },
    { "user", "`user` without a user name" },
    { "topic foo bar", "\"foo\": unknown access (read, write, readwrite or deny; a topic with a space needs one)" },
    { "topic READ a", "\"READ\": unknown access" },
    { "topic read a/b#", "\"a/b#\": '#' must be a whole level" },
    { "topic read a/#/b", "\"a/#/b\": '#' must be the last level" },
    { "topic read a+/b", "\"a+/b\": '+' must be a whole level" },
    { "pattern read %u+", "'+' must be a whole level" },
};

Test(acl_errors, malformed_lines_name_their_line)
{
    for (size_t i = 0; i < TB_ARRAY_LEN(bad_acls); i++) {
        char text[512];
        snprintf(text, sizeof text, "topic read ok\nuser u\n\n%s\ntopic read later\n", bad_acls[i].line);
        unsigned want = 4;
        for (const char *p = bad_acls[i].line; *p; p++)
            want += *p == '\n';
        const auth_error_t *e = acl_fails(text);
        cr_assert_eq(e->line, want, "\"%s\": line %u (%s)", bad_acls[i].line, e->line, e->msg);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "acl:%u: ", want);
        cr_assert(strncmp(e->msg, prefix, strlen(prefix)) == 0, "%s", e->msg);
        cr_assert(strstr(e->msg, bad_acls[i].says), "\"%s\" does not say \"%s\"", e->msg, bad_acls[i].says);
    }
}

Test(acl_errors, nul_byte_and_missing_file)
{
    const char text[] = "topic a\ntopic b\0c\n";
    auth_acl_t *a = NULL;
    auth_error_t err;
    cr_assert_eq(auth_acl_parse("acl", text, sizeof text - 1, &a, &err), -1);
    cr_assert_eq(err.line, 2);
    assert_has(err.msg, "acl:2: NUL byte");
    cr_assert_eq(auth_acl_load("/nonexistent/acl", &a, &err), -1);
    cr_assert_null(a);
    cr_assert_eq(err.line, 0);
    assert_has(err.msg, "/nonexistent/acl: cannot open");
}

Test(acl_refs, ref_keeps_it_alive)
{
    auth_acl_t *a = acl_ok("topic x\n");
    cr_assert_eq(auth_acl_ref(a), a);
    auth_acl_unref(a);
    cr_assert(acl_may(a, NULL, "c", "x", R), "one reference left");
    auth_acl_unref(a);
    auth_acl_unref(NULL);
    cr_assert_null(auth_acl_ref(NULL));
}
