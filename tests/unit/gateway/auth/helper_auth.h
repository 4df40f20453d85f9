/*
 * helper_auth.h: small helpers shared by gateway/auth's unit tests, so each
 * test reads as its claim: this file parses (or fails on that line), this
 * client may (or may not) do that.
 */
#ifndef TB_TEST_HELPER_AUTH_H
#define TB_TEST_HELPER_AUTH_H

#include "gateway/auth/auth.h"

#include <stdbool.h>
#include <string.h>

/* The path of a file under tests/data/auth/ (TRIB_TESTDATA, else relative). Static buffer. */
const char *auth_testdata(const char *file);

/* Parses text that must parse (the test fails with the message otherwise). */
auth_passwd_t *pw_ok(const char *text);
auth_acl_t *acl_ok(const char *text);

/* Parses text that must fail; returns the error (static). */
const auth_error_t *pw_fails(const char *text);
const auth_error_t *acl_fails(const char *text);

/* auth_passwd_check with C strings. */
auth_result_t pw_check(const auth_passwd_t *p, const char *user, const char *password);

/* auth_acl_allows with a C string topic. */
bool acl_may(const auth_acl_t *a, const char *user, const char *client_id, const char *topic, auth_access_t access);

#define assert_has(text, part) \
    cr_assert(strstr((text), (part)) != NULL, "\"%s\" does not say \"%s\"", (text), (part))

#endif
