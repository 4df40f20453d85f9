/*
 * test_passwd.c: the password file as mosquitto_passwd writes it
 * (tests/data/auth/passwd says how that file was made and checked), the
 * errors an operator gets for a broken one (each naming its line), and
 * the check: right password, wrong password, unknown user at the same cost.
 */
#include "helper_auth.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* alice's and carol's hashes from tests/data/auth/passwd. */
#define H7 "$7$101$YzRYpC3RZdNJC3g0$/u7OvS+g69saLhhkrwmYMT97DYvOfazFnwQ29Z65A4RPvnPMjztaQ0pGZl3qWxEof8W9AwQaK1NZwj0ZgYAEMQ=="
#define H7_PW "correct horse battery staple"
#define H6 "$6$2my1IRw6I7uMtZtV$zdyQA5iYIXv+5Hg/PfX4r4G/oYBYnFJIeCHVEzpEGxhL5wWRXIYZ5DSB4GiFlV6VAeWD33s2db9A9gJdYy1Npg=="
#define H6_PW "old-style sha512"

/* ---- the vendored file ------------------------------------------------------ */

Test(passwd_file, mosquitto_passwd_output_loads_and_checks)
{
    auth_passwd_t *p = NULL;
    auth_error_t err = { { 0 }, 0 };
    cr_assert_eq(auth_passwd_load(auth_testdata("passwd"), &p, &err), 0, "%s", err.msg);
    cr_assert_eq(auth_passwd_count(p), 4);
    cr_assert_eq(pw_check(p, "alice", "correct horse battery staple"), AUTH_OK);
    cr_assert_eq(pw_check(p, "bob", "hunter2"), AUTH_OK);
    cr_assert_eq(pw_check(p, "carol", "old-style sha512"), AUTH_OK, "$6$ from mosquitto_passwd -H sha512");
    cr_assert_eq(pw_check(p, "dave", "dave pass"), AUTH_OK, "$6$ computed with Python");
    auth_passwd_unref(p);
}

Test(passwd_file, wrong_password_is_bad_password)
{
    auth_passwd_t *p = NULL;
    auth_error_t err = { { 0 }, 0 };
    cr_assert_eq(auth_passwd_load(auth_testdata("passwd"), &p, &err), 0, "%s", err.msg);
    cr_assert_eq(pw_check(p, "alice", "correct horse battery stapl"), AUTH_BAD_PASSWORD);
    cr_assert_eq(pw_check(p, "alice", "hunter2"), AUTH_BAD_PASSWORD, "another user's password");
    cr_assert_eq(pw_check(p, "alice", ""), AUTH_BAD_PASSWORD);
    cr_assert_eq(pw_check(p, "carol", "old-style sha51"), AUTH_BAD_PASSWORD);
    cr_assert_eq(pw_check(p, "dave", "Dave pass"), AUTH_BAD_PASSWORD);
    auth_passwd_unref(p);
}

Test(passwd_file, unknown_user_is_no_user)
{
    auth_passwd_t *p = pw_ok("alice:" H7 "\n");
    cr_assert_eq(pw_check(p, "mallory", H7_PW), AUTH_NO_USER);
    cr_assert_eq(pw_check(p, "Alice", H7_PW), AUTH_NO_USER, "user names are case sensitive");
    cr_assert_eq(pw_check(p, "alic", H7_PW), AUTH_NO_USER);
    cr_assert_eq(pw_check(p, NULL, H7_PW), AUTH_NO_USER);
    /* user_len counts: "alice" followed by more bytes is someone else */
    cr_assert_eq(auth_passwd_check(p, "alice\0x", 7, (const uint8_t *)H7_PW, strlen(H7_PW)), AUTH_NO_USER);
    auth_passwd_unref(p);
}

Test(passwd_file, password_bytes_are_all_compared)
{
    auth_passwd_t *p = pw_ok("alice:" H7 "\n");
    /* Mosquitto hashes strlen(password): a NUL would cut it there. We hash every byte. */
    const char with_nul[] = H7_PW "\0tail";
    cr_assert_eq(auth_passwd_check(p, "alice", 5, (const uint8_t *)with_nul, sizeof with_nul - 1), AUTH_BAD_PASSWORD);
    cr_assert_eq(auth_passwd_check(p, "alice", 5, (const uint8_t *)with_nul, strlen(H7_PW)), AUTH_OK);
    auth_passwd_unref(p);
}

Test(passwd_file, missing_file_and_directory_fail_without_a_line)
{
    auth_passwd_t *p = (auth_passwd_t *)1;
    auth_error_t err = { { 0 }, 99 };
    cr_assert_eq(auth_passwd_load("/nonexistent/tributary/passwd", &p, &err), -1);
    cr_assert_null(p);
    cr_assert_eq(err.line, 0);
    assert_has(err.msg, "/nonexistent/tributary/passwd: cannot open");
    cr_assert_eq(auth_passwd_load("/", &p, &err), -1);
    assert_has(err.msg, "/: is a directory");
}

/* ---- line handling ---------------------------------------------------------- */

Test(passwd_lines, comments_blanks_crlf_and_spaces)
{
    auth_passwd_t *p = pw_ok("# made by mosquitto_passwd\r\n"
                             "\r\n"
                             "   \t \n"
                             "   # an indented comment\n"
                             "alice:" H7 "\r\n"
                             "  carol : " H6 "  \t\r\n"
                             "#bob:" H7 "\n");
    cr_assert_eq(auth_passwd_count(p), 2);
    cr_assert_eq(pw_check(p, "alice", H7_PW), AUTH_OK, "CR dropped");
    cr_assert_eq(pw_check(p, "carol", H6_PW), AUTH_OK, "blanks around the name and the hash dropped");
    cr_assert_eq(pw_check(p, "bob", H7_PW), AUTH_NO_USER, "a commented-out user is not a user");
    auth_passwd_unref(p);
}

Test(passwd_lines, last_line_without_newline)
{
    auth_passwd_t *p = pw_ok("carol:" H6);
    cr_assert_eq(pw_check(p, "carol", H6_PW), AUTH_OK);
    auth_passwd_unref(p);
}

Test(passwd_lines, empty_file_has_no_users)
{
    auth_passwd_t *p = pw_ok("");
    cr_assert_eq(auth_passwd_count(p), 0);
    cr_assert_eq(pw_check(p, "alice", H7_PW), AUTH_NO_USER);
    auth_passwd_unref(p);
    cr_assert_eq(auth_passwd_check(NULL, "alice", 5, (const uint8_t *)"x", 1), AUTH_NO_USER);
    cr_assert_eq(auth_passwd_count(NULL), 0);
}

/* ---- errors, each naming its line --------------------------------------------- */

Test(passwd_errors, duplicate_user_names_both_lines)
{
    const auth_error_t *e = pw_fails("alice:" H7 "\n"
                                     "# a comment\n"
                                     "carol:" H6 "\n"
                                     "alice:" H6 "\n");
    cr_assert_eq(e->line, 4);
    assert_has(e->msg, "passwd:4: duplicate user \"alice\" (first on line 1)");
}

Test(passwd_errors, the_first_duplicate_in_the_file_is_named)
{
    const auth_error_t *e = pw_fails("zed:" H6 "\n"
                                     "amy:" H6 "\n"
                                     "zed:" H6 "\n"
                                     "amy:" H6 "\n"
                                     "zed:" H6 "\n");
    cr_assert_eq(e->line, 3, "%s", e->msg);
    assert_has(e->msg, "duplicate user \"zed\" (first on line 1)");
}

typedef struct bad_line {
    const char *line;
    const char *says;
} bad_line_t;

static const bad_line_t bad_lines[] = {
    { "alice", "no ':' between user name and hash" },
    { ":" H7, "empty user name" },
    { "  :" H7, "empty user name" },
    { "bob:", "user \"bob\": not a hash" },
    { "bob:hunter2", "not a hash (a plain text password? mosquitto_passwd -U" },
    { "bob:$5$abc$def", "unknown hash type" },
    { "bob:$7$$YzRYpC3RZdNJC3g0$AAAA", "no iteration count" },
    { "bob:$7$1x1$YzRYpC3RZdNJC3g0$AAAA", "no iteration count" },
    { "bob:$7$0$YzRYpC3RZdNJC3g0$AAAA", "at least 1" },
    { "bob:$7$99999999999$YzRYpC3RZdNJC3g0$AAAA", "iteration count too large" },
    { "bob:$7$101", "no iteration count" },
    { "bob:$7$101$YzRYpC3RZdNJC3g0", "no '$' between salt and hash" },
    { "bob:$7$101$YzRYpC3RZdNJC3g$AAAA", "malformed salt" },          /* 15 chars */
    { "bob:$7$101$YzRYpC3RZdNJC3g0AAAA$AAAA", "malformed salt" },     /* 15 bytes */
    { "bob:$7$101$YzRYpC3RZdNJ*3g0$AAAA", "malformed salt" },         /* not base64 */
    { "bob:$6$YzRYpC3RZdNJC3g0$AAAA", "malformed hash: not base64 of 64 bytes" },
    { "bob:" H7 ":junk", "malformed hash" },
    { "bob:" H7 "=", "malformed hash" },
    { "bob:$6$" "2my1IRw6I7uMtZtV$zdyQA5iYIXv+5Hg/PfX4r4G/oYBYnFJIeCHVEzpEGxhL5wWRXIYZ5DSB4GiFlV6VAeWD33s2db9A9gJdYy1Np=g=",
      "malformed hash" },
};

Test(passwd_errors, malformed_lines_name_their_line)
{
    for (size_t i = 0; i < TB_ARRAY_LEN(bad_lines); i++) {
        char text[1024];
        snprintf(text, sizeof text, "# users\nalice:%s\n\n%s\ncarol:%s\n", H7, bad_lines[i].line, H6);
        const auth_error_t *e = pw_fails(text);
        cr_assert_eq(e->line, 4, "\"%s\": line %u (%s)", bad_lines[i].line, e->line, e->msg);
        cr_assert(strncmp(e->msg, "passwd:4: ", 10) == 0, "\"%s\": %s", bad_lines[i].line, e->msg);
        cr_assert(strstr(e->msg, bad_lines[i].says), "\"%s\": \"%s\" does not say \"%s\"", bad_lines[i].line,
                  e->msg, bad_lines[i].says);
        cr_assert(strstr(e->msg, "YzRY") == NULL && strstr(e->msg, "AAAA") == NULL, "a hash in the message: %s",
                  e->msg);
    }
}

Test(passwd_errors, unpadded_base64_is_accepted)
{
    /* OpenSSL writes padding; a hand-made file without it means the same bytes. */
    char line[256];
    snprintf(line, sizeof line, "carol:%.*s\n", (int)strlen(H6) - 2, H6);
    auth_passwd_t *p = pw_ok(line);
    cr_assert_eq(pw_check(p, "carol", H6_PW), AUTH_OK);
    auth_passwd_unref(p);
}

Test(passwd_errors, nul_byte_is_refused)
{
    const char text[] = "alice:" H7 "\nbo\0b:" H6 "\n";
    auth_passwd_t *p = NULL;
    auth_error_t err;
    cr_assert_eq(auth_passwd_parse("passwd", text, sizeof text - 1, &p, &err), -1);
    cr_assert_eq(err.line, 2);
    assert_has(err.msg, "NUL byte");
}

Test(passwd_errors, long_user_name_is_cut_in_the_message)
{
    char text[2048];
    memset(text, 'u', 1000);
    snprintf(text + 1000, sizeof text - 1000, ":nothash\n");
    const auth_error_t *e = pw_fails(text);
    cr_assert_lt(strlen(e->msg), sizeof e->msg - 1, "message truncated by the buffer: %s", e->msg);
    assert_has(e->msg, "not a hash");
}

/* ---- auth_passwd_hash ---------------------------------------------------------- */

Test(passwd_hash, round_trip)
{
    char h[AUTH_PASSWD_HASH_MAX], line[AUTH_PASSWD_HASH_MAX + 16];
    int n = auth_passwd_hash((const uint8_t *)"s3cret", 6, AUTH_PASSWD_DEFAULT_ITERATIONS, h, sizeof h);
    cr_assert_eq(n, (int)strlen(h));
    cr_assert(strncmp(h, "$7$101$", 7) == 0, "%s", h);
    cr_assert_eq(n, 7 + 16 + 1 + 88, "%s", h);
    snprintf(line, sizeof line, "eve:%s\n", h);
    auth_passwd_t *p = pw_ok(line);
    cr_assert_eq(pw_check(p, "eve", "s3cret"), AUTH_OK);
    cr_assert_eq(pw_check(p, "eve", "s3cret "), AUTH_BAD_PASSWORD);
    auth_passwd_unref(p);
}

Test(passwd_hash, binary_password_and_other_iterations)
{
    /* Not ending in NUL: HMAC pads a short key with zeros, so "x" and
     * "x\0" are one PBKDF2 key (for Mosquitto too). */
    const uint8_t pw[] = { 0, 1, 2, 0xff, 7 };
    char h[AUTH_PASSWD_HASH_MAX], line[AUTH_PASSWD_HASH_MAX + 16];
    cr_assert_gt(auth_passwd_hash(pw, sizeof pw, 7, h, sizeof h), 0);
    cr_assert(strncmp(h, "$7$7$", 5) == 0, "%s", h);
    snprintf(line, sizeof line, "bin:%s\n", h);
    auth_passwd_t *p = pw_ok(line);
    cr_assert_eq(auth_passwd_check(p, "bin", 3, pw, sizeof pw), AUTH_OK);
    cr_assert_eq(auth_passwd_check(p, "bin", 3, pw, sizeof pw - 1), AUTH_BAD_PASSWORD);
    auth_passwd_unref(p);
}

Test(passwd_hash, fresh_salt_each_time)
{
    char a[AUTH_PASSWD_HASH_MAX], b[AUTH_PASSWD_HASH_MAX];
    cr_assert_gt(auth_passwd_hash((const uint8_t *)"x", 1, 1, a, sizeof a), 0);
    cr_assert_gt(auth_passwd_hash((const uint8_t *)"x", 1, 1, b, sizeof b), 0);
    cr_assert_str_neq(a, b);
}

Test(passwd_hash, refuses_a_short_buffer_and_zero_iterations)
{
    char h[AUTH_PASSWD_HASH_MAX];
    cr_assert_eq(auth_passwd_hash((const uint8_t *)"x", 1, 101, h, 112), -1, "needs 113 bytes with the NUL");
    cr_assert_eq(auth_passwd_hash((const uint8_t *)"x", 1, 101, h, 113), 112);
    cr_assert_eq(auth_passwd_hash((const uint8_t *)"x", 1, 0, h, sizeof h), -1);
    cr_assert_eq(auth_passwd_hash((const uint8_t *)"x", 1, 101, NULL, 0), -1);
}

/* ---- no timing oracle, reference counting --------------------------------------- */

static double check_ms(const auth_passwd_t *p, const char *user)
{
    double best = 1e9;
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = tb_mono_ns();
        pw_check(p, user, "wrong");
        double ms = (double)(tb_mono_ns() - t0) / 1e6;
        best = ms < best ? ms : best;
    }
    return best;
}

Test(passwd_timing, unknown_user_costs_a_hash_like_a_known_one)
{
    char h[AUTH_PASSWD_HASH_MAX], text[4 * AUTH_PASSWD_HASH_MAX];
    cr_assert_gt(auth_passwd_hash((const uint8_t *)"pw", 2, 20000, h, sizeof h), 0);
    int n = snprintf(text, sizeof text, "a:%s\nb:%s\n", h, h);
    cr_assert_gt(n, 0);
    auth_passwd_t *p = pw_ok(text);
    double known = check_ms(p, "a"), unknown = check_ms(p, "nobody");
    /* Without the dummy hash "nobody" takes microseconds against milliseconds. */
    cr_assert_gt(unknown, known * 0.25, "unknown %.3f ms, known %.3f ms", unknown, known);
    auth_passwd_unref(p);
}

static void *checker(void *arg)
{
    auth_passwd_t *p = arg;
    for (int i = 0; i < 20; i++)
        if (pw_check(p, "carol", H6_PW) != AUTH_OK)
            return (void *)1;
    auth_passwd_unref(p);
    return NULL;
}

Test(passwd_refs, threads_keep_their_table_after_the_owner_lets_go)
{
    auth_passwd_t *p = pw_ok("carol:" H6 "\n");
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(auth_passwd_ref(p), p);
        cr_assert_eq(pthread_create(&t[i], NULL, checker, p), 0);
    }
    auth_passwd_unref(p); /* a reload swapped it out; the checks go on */
    for (int i = 0; i < 4; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        cr_assert_null(rv);
    }
    auth_passwd_unref(NULL);
    cr_assert_null(auth_passwd_ref(NULL));
}
