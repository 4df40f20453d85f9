/*
 * helper_auth.c: see helper_auth.h.
 */
#include "helper_auth.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

const char *auth_testdata(const char *file)
{
    static char path[4096];
    const char *d = getenv("TRIB_TESTDATA");
    snprintf(path, sizeof path, "%s/auth/%s", d && *d ? d : "tests/data", file);
    return path;
}

auth_passwd_t *pw_ok(const char *text)
{
    auth_passwd_t *p = NULL;
    auth_error_t err = { { 0 }, 0 };
    int rc = auth_passwd_parse("passwd", text, strlen(text), &p, &err);
    cr_assert_eq(rc, 0, "parse failed: %s", err.msg);
    cr_assert_not_null(p);
    return p;
}

auth_acl_t *acl_ok(const char *text)
{
    auth_acl_t *a = NULL;
    auth_error_t err = { { 0 }, 0 };
    int rc = auth_acl_parse("acl", text, strlen(text), &a, &err);
    cr_assert_eq(rc, 0, "parse failed: %s", err.msg);
    cr_assert_not_null(a);
    return a;
}

const auth_error_t *pw_fails(const char *text)
{
    static auth_error_t err;
    auth_passwd_t *p = (auth_passwd_t *)1;
    memset(&err, 0, sizeof err);
    int rc = auth_passwd_parse("passwd", text, strlen(text), &p, &err);
    cr_assert_eq(rc, -1, "\"%s\" parsed", text);
    cr_assert_null(p, "a failed parse left a table");
    return &err;
}

const auth_error_t *acl_fails(const char *text)
{
    static auth_error_t err;
    auth_acl_t *a = (auth_acl_t *)1;
    memset(&err, 0, sizeof err);
    int rc = auth_acl_parse("acl", text, strlen(text), &a, &err);
    cr_assert_eq(rc, -1, "\"%s\" parsed", text);
    cr_assert_null(a, "a failed parse left a table");
    return &err;
}

auth_result_t pw_check(const auth_passwd_t *p, const char *user, const char *password)
{
    return auth_passwd_check(p, user, user ? strlen(user) : 0, (const uint8_t *)password, strlen(password));
}

bool acl_may(const auth_acl_t *a, const char *user, const char *client_id, const char *topic, auth_access_t access)
{
    return auth_acl_allows(a, user, client_id, topic, strlen(topic), access);
}
