/* Tests for http.tls: the keys of a listener's tls mapping on the HTTP
 * endpoint (same names, defaults and rules), on when the mapping is given
 * or the environment sets one of its keys, use_identity_as_username
 * refused with why, the diff, and the effective configuration read back
 * (with and without it). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "helper_config.h"
#include "base/base.h"

static const char *HEAD =
    "edge: {edge_name: e1, cluster_url: \"http://127.0.0.1:6650\"}\n"
    "mqtt:\n"
    "  topic_mappings:\n"
    "    - {mqtt_pattern: a/+/b, danube_topic: /e1/t}\n"
    "http:\n"
    "  listener: \"127.0.0.1:9443\"\n";

/* HEAD, then the text under http: (indented by the caller). */
static cfg_t *load_with(const char *http_extra, char *const *env) { return cfgt_load_cat(HEAD, http_extra, env); }

static void expect_error(const char *extra, const char *needle1, const char *needle2)
{
    cfgt_expect_refused(load_with(extra, NULL), extra, needle1, needle2);
}

Test(http_tls, absent_means_plain_http)
{
    cfg_t *c = load_with("", NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert(!c->http.has_tls);
    cr_assert_str_eq(c->http.tls.cert_file, "");
    cr_assert_str_eq(c->http.tls.key_file, "");
    cr_assert(!cfg_defaults()->http.has_tls);
    cfg_free(c);
}

Test(http_tls, the_listener_keys_with_the_listener_defaults)
{
    cfg_t *c = load_with("  tls: {cert_file: http.pem, key_file: http.key}\n", NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert(c->http.has_tls);
    cr_assert_str_eq(c->http.tls.cert_file, "http.pem");
    cr_assert_str_eq(c->http.tls.key_file, "http.key");
    cr_assert_str_eq(c->http.tls.ca_file, "");
    cr_assert(!c->http.tls.require_client_cert);
    cr_assert_eq(c->http.tls.min_version, CFG_TLS_1_2);
    cr_assert_str_eq(c->http.tls.ciphers, "");
    cr_assert(!c->http.tls.use_identity_as_username);
    cfg_free(c);
    c = load_with("  tls:\n"
                  "    cert_file: a.pem\n"
                  "    key_file: a.key\n"
                  "    ca_file: ca.pem\n"
                  "    require_client_cert: true\n"
                  "    min_version: 1.3\n"
                  "    ciphers: ECDHE+AESGCM\n",
                  NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_str_eq(c->http.tls.ca_file, "ca.pem");
    cr_assert(c->http.tls.require_client_cert);
    cr_assert_eq(c->http.tls.min_version, CFG_TLS_1_3);
    cr_assert_str_eq(c->http.tls.ciphers, "ECDHE+AESGCM");
    cfg_free(c);
}

Test(http_tls, cert_and_key_are_required_with_it)
{
    expect_error("  tls: {cert_file: a.pem}\n", "test.yaml:7:", "http.tls.key_file: required key missing");
    expect_error("  tls: {key_file: a.key}\n", "http.tls.cert_file: required key missing", NULL);
    expect_error("  tls: {}\n", "http.tls.cert_file: required key missing", "needs cert_file and key_file");
    expect_error("  tls: {ca_file: ca.pem}\n", "http.tls.cert_file: required key missing", NULL);
}

Test(http_tls, require_client_cert_needs_ca_file)
{
    expect_error("  tls: {cert_file: a, key_file: b, require_client_cert: true}\n", "http.tls.require_client_cert",
                 "needs http.tls.ca_file");
}

Test(http_tls, use_identity_as_username_has_no_meaning_here)
{
    expect_error("  tls: {cert_file: a, key_file: b, use_identity_as_username: true}\n",
                 "http.tls.use_identity_as_username", "no user names");
}

Test(http_tls, unknown_keys_and_bad_values)
{
    expect_error("  tls: {cert_file: a, key_file: b, cert: c}\n", "http.tls.cert", "unknown key");
    expect_error("  tls: {cert_file: a, key_file: b, min_version: \"1.1\"}\n", "http.tls.min_version", NULL);
    expect_error("  tls: a.pem\n", "http.tls", "expected a section");
}

Test(http_tls, the_environment_turns_it_on)
{
    char *const env[] = { "TRIBUTARY_HTTP_TLS_CERT_FILE=/etc/e.pem", "TRIBUTARY_HTTP_TLS_KEY_FILE=/etc/e.key", NULL };
    cfg_t *c = load_with("", env);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert(c->http.has_tls);
    cr_assert_str_eq(c->http.tls.cert_file, "/etc/e.pem");
    cfg_free(c);
    char *const half[] = { "TRIBUTARY_HTTP_TLS_CERT_FILE=/etc/e.pem", NULL };
    c = load_with("", half);
    cr_assert_null(c);
    cr_assert(strstr(cfgt_err, "http.tls.key_file: required key missing"), "%s", cfgt_err);
}

static char diffs[8][128];
static int ndiffs;
static void collect(void *arg, const char *key)
{
    (void)arg;
    if (ndiffs < 8)
        snprintf(diffs[ndiffs++], sizeof diffs[0], "%s", key);
}

Test(http_tls, diff_names_each_changed_key)
{
    cfg_t *a = load_with("  tls: {cert_file: a, key_file: b}\n", NULL);
    cfg_t *b = load_with("  tls: {cert_file: a2, key_file: b, min_version: \"1.3\"}\n", NULL);
    cr_assert(a && b, "%s", cfgt_err);
    ndiffs = 0;
    cfg_diff(a, b, collect, NULL);
    cr_assert_eq(ndiffs, 2);
    cr_assert_str_eq(diffs[0], "http.tls.cert_file");
    cr_assert_str_eq(diffs[1], "http.tls.min_version");
    cfg_free(a);
    cfg_free(b);
}

static cfg_t *printed_and_read_back(const cfg_t *a, char **text)
{
    static char *const empty_env[] = { NULL };
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    cfg_print(a, f);
    fclose(f);
    cfg_t *b = NULL;
    cfg_load_string("printed", *text, len, empty_env, &b, cfgt_err, sizeof cfgt_err);
    cr_assert_not_null(b, "%s\n%s", cfgt_err, *text);
    return b;
}

Test(http_tls, the_effective_configuration_reads_back)
{
    cfg_t *a = load_with("  tls: {cert_file: a, key_file: b, ca_file: c, require_client_cert: yes}\n", NULL);
    cr_assert_not_null(a, "%s", cfgt_err);
    char *text = NULL;
    cfg_t *b = printed_and_read_back(a, &text);
    cr_assert(b->http.has_tls);
    ndiffs = 0;
    cfg_diff(a, b, collect, NULL);
    cr_assert_eq(ndiffs, 0, "%s differs once printed", diffs[0]);
    free(text);
    cfg_free(a);
    cfg_free(b);
    /* plain: no tls mapping printed (it would ask for a certificate), and none read back */
    a = load_with("", NULL);
    b = printed_and_read_back(a, &text);
    const char *http = strstr(text, "\nhttp:\n"), *after = http ? strstr(http, "\nshutdown_timeout_ms:") : NULL;
    cr_assert(http && after, "%s", text);
    const char *tls = strstr(http, "  tls:\n");
    cr_assert(!tls || tls > after, "%s", text);
    cr_assert(!b->http.has_tls);
    free(text);
    cfg_free(a);
    cfg_free(b);
}
