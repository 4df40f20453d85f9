/* Tests for mqtt.listeners: entries, their tls mapping and its defaults,
 * the rules between its keys, mqtt.listener kept as the one plain listener
 * (and refused alongside), errors naming file, line and key, the diff and
 * the effective configuration read back. */
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
    "    - {mqtt_pattern: a/+/b, danube_topic: /e1/t}\n";

/* HEAD, then the text under mqtt: (indented by the caller). */
static cfg_t *load_with(const char *mqtt_extra, char *const *env) { return cfgt_load_cat(HEAD, mqtt_extra, env); }

static void expect_error(const char *extra, const char *needle1, const char *needle2)
{
    cfgt_expect_refused(load_with(extra, NULL), extra, needle1, needle2);
}

Test(listeners, absent_means_mqtt_listener_alone)
{
    cfg_t *c = load_with("  listener: \"127.0.0.1:1884\"\n", NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.nlisteners, 0);
    cr_assert_null(c->mqtt.listeners);
    cr_assert_str_eq(c->mqtt.listener, "127.0.0.1:1884");
    cfg_free(c);
}

Test(listeners, plain_and_tls_entries_with_defaults)
{
    cfg_t *c = load_with("  listeners:\n"
                         "    - address: \"0.0.0.0:1883\"\n"
                         "    - address: \"[::1]:8883\"\n"
                         "      tls: { cert_file: server.pem, key_file: server.key }\n",
                         NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.nlisteners, 2);
    const cfg_listener_t *a = &c->mqtt.listeners[0], *b = &c->mqtt.listeners[1];
    cr_assert_str_eq(a->address, "0.0.0.0:1883");
    cr_assert(!a->has_tls);
    cr_assert_null(a->tls.cert_file);
    cr_assert_eq(a->line, 6);
    cr_assert_str_eq(b->address, "[::1]:8883");
    cr_assert(b->has_tls);
    cr_assert_str_eq(b->tls.cert_file, "server.pem");
    cr_assert_str_eq(b->tls.key_file, "server.key");
    cr_assert_str_eq(b->tls.ca_file, "");
    cr_assert(!b->tls.require_client_cert);
    cr_assert_eq(b->tls.min_version, CFG_TLS_1_2);
    cr_assert_str_eq(b->tls.ciphers, "");
    cr_assert(!b->tls.use_identity_as_username);
    cfg_free(c);
}

Test(listeners, every_tls_key)
{
    cfg_t *c = load_with("  listeners:\n"
                         "    - address: \"127.0.0.1:8883\"\n"
                         "      tls:\n"
                         "        cert_file: s.pem\n"
                         "        key_file: s.key\n"
                         "        ca_file: ca.pem\n"
                         "        require_client_cert: true\n"
                         "        min_version: \"1.3\"\n"
                         "        ciphers: \"ECDHE+AESGCM\"\n"
                         "        use_identity_as_username: true\n",
                         NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    const cfg_listener_t *l = &c->mqtt.listeners[0];
    cr_assert_str_eq(l->tls.ca_file, "ca.pem");
    cr_assert(l->tls.require_client_cert);
    cr_assert_eq(l->tls.min_version, CFG_TLS_1_3);
    cr_assert_str_eq(l->tls.ciphers, "ECDHE+AESGCM");
    cr_assert(l->tls.use_identity_as_username);
    cfg_free(c);
}

Test(listeners, min_version_as_an_unquoted_number)
{
    cfg_t *c = load_with("  listeners:\n"
                         "    - address: \"127.0.0.1:8883\"\n"
                         "      tls: {cert_file: s.pem, key_file: s.key, min_version: 1.3}\n",
                         NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.listeners[0].tls.min_version, CFG_TLS_1_3);
    cfg_free(c);
    expect_error("  listeners:\n"
                 "    - address: \"127.0.0.1:8883\"\n"
                 "      tls: {cert_file: s.pem, key_file: s.key, min_version: 1.1}\n",
                 "test.yaml:7:", "mqtt.listeners[0].tls.min_version: expected one of 1.2, 1.3");
}

Test(listeners, both_keys_are_an_error_naming_mqtt_listener)
{
    expect_error("  listener: \"127.0.0.1:1883\"\n"
                 "  listeners:\n"
                 "    - address: \"127.0.0.1:1884\"\n",
                 "test.yaml:5:3: mqtt.listener:", "mqtt.listeners (line 7)");
}

Test(listeners, listener_from_the_environment_with_listeners_is_an_error)
{
    char *env[] = { "TRIBUTARY_MQTT_LISTENER=127.0.0.1:1999", NULL };
    cfg_t *c = load_with("  listeners:\n"
                         "    - address: \"127.0.0.1:1884\"\n",
                         env);
    cr_assert_null(c);
    cr_assert(strstr(cfgt_err, "mqtt.listener:") && strstr(cfgt_err, "TRIBUTARY_MQTT_LISTENER"), "%s", cfgt_err);
}

Test(listeners, address_is_required)
{
    expect_error("  listeners:\n"
                 "    - tls: {cert_file: a, key_file: b}\n",
                 "test.yaml:6:7: mqtt.listeners[0].address: required key missing", NULL);
}

Test(listeners, tls_needs_cert_and_key)
{
    expect_error("  listeners:\n"
                 "    - address: \"127.0.0.1:8883\"\n"
                 "      tls: {cert_file: a}\n",
                 "test.yaml:7:12: mqtt.listeners[0].tls.key_file: required key missing", NULL);
    expect_error("  listeners:\n"
                 "    - address: \"127.0.0.1:8883\"\n"
                 "      tls:\n",
                 "mqtt.listeners[0].tls.cert_file: required key missing", NULL);
}

Test(listeners, unknown_keys_name_the_entry)
{
    expect_error("  listeners:\n"
                 "    - address: \"127.0.0.1:8883\"\n"
                 "      tls: {cert_file: a, key_file: b, cafile: c}\n",
                 "test.yaml:7:40: mqtt.listeners[0].tls.cafile: unknown key", "did you mean \"ca_file\"");
    expect_error("  listeners:\n"
                 "    - adress: \"127.0.0.1:8883\"\n",
                 "test.yaml:6:7: mqtt.listeners[0].adress: unknown key", "did you mean \"address\"");
}

Test(listeners, bad_address_and_types)
{
    expect_error("  listeners:\n"
                 "    - address: \"nowhere\"\n",
                 "test.yaml:6:16: mqtt.listeners[0].address:", "host:port");
    expect_error("  listeners:\n"
                 "    - address: \"127.0.0.1:1\"\n"
                 "      tls: {cert_file: a, key_file: b, require_client_cert: maybe}\n",
                 "mqtt.listeners[0].tls.require_client_cert: expected true or false", NULL);
    expect_error("  listeners: \"127.0.0.1:1883\"\n", "test.yaml:5:14: mqtt.listeners: expected a list", NULL);
    expect_error("  listeners: []\n", "mqtt.listeners: at least 1 listener", NULL);
}

Test(listeners, require_client_cert_needs_ca_file)
{
    expect_error("  listeners:\n"
                 "    - address: \"127.0.0.1:8883\"\n"
                 "      tls: {cert_file: a, key_file: b, require_client_cert: true}\n",
                 "test.yaml:7:61: mqtt.listeners[0].tls.require_client_cert: needs tls.ca_file", NULL);
}

Test(listeners, use_identity_needs_require_client_cert)
{
    expect_error("  listeners:\n"
                 "    - address: \"127.0.0.1:8883\"\n"
                 "      tls: {cert_file: a, key_file: b, ca_file: c, use_identity_as_username: true}\n",
                 "mqtt.listeners[0].tls.use_identity_as_username: needs tls.require_client_cert", NULL);
}

Test(listeners, same_address_twice)
{
    expect_error("  listeners:\n"
                 "    - address: \"127.0.0.1:8883\"\n"
                 "    - address: \"127.0.0.1:8883\"\n",
                 "test.yaml:7:16: mqtt.listeners[1].address: \"127.0.0.1:8883\" is already mqtt.listeners[0] (line 6)",
                 NULL);
    /* port 0 twice: two ports the kernel picks */
    cfg_t *c = load_with("  listeners:\n"
                         "    - address: \"127.0.0.1:0\"\n"
                         "    - address: \"127.0.0.1:0\"\n",
                         NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cfg_free(c);
}

static char diffs[16][128];
static int ndiffs;
static void collect(void *arg, const char *key)
{
    (void)arg;
    if (ndiffs < 16)
        snprintf(diffs[ndiffs++], sizeof diffs[0], "%s", key);
}

Test(listeners, diff_names_each_changed_listener_key)
{
    cfg_t *a = load_with("  listeners:\n"
                         "    - address: \"127.0.0.1:1883\"\n"
                         "    - address: \"127.0.0.1:8883\"\n"
                         "      tls: {cert_file: a, key_file: b}\n",
                         NULL);
    cfg_t *b = load_with("  listeners:\n"
                         "    - address: \"127.0.0.1:1883\"\n"
                         "    - address: \"127.0.0.1:8883\"\n"
                         "      tls: {cert_file: a2, key_file: b, min_version: \"1.3\"}\n",
                         NULL);
    cfg_t *c = load_with("  listeners:\n"
                         "    - address: \"127.0.0.1:1883\"\n",
                         NULL);
    cr_assert(a && b && c, "%s", cfgt_err);
    ndiffs = 0;
    cfg_diff(a, b, collect, NULL);
    cr_assert_eq(ndiffs, 2);
    cr_assert_str_eq(diffs[0], "mqtt.listeners[1].tls.cert_file");
    cr_assert_str_eq(diffs[1], "mqtt.listeners[1].tls.min_version");
    ndiffs = 0;
    cfg_diff(a, c, collect, NULL);
    cr_assert_eq(ndiffs, 1);
    cr_assert_str_eq(diffs[0], "mqtt.listeners");
    ndiffs = 0;
    cfg_diff(a, a, collect, NULL);
    cr_assert_eq(ndiffs, 0);
    cfg_free(a);
    cfg_free(b);
    cfg_free(c);
}

Test(listeners, the_effective_configuration_reads_back)
{
    cfg_t *a = load_with("  listeners:\n"
                         "    - address: \"127.0.0.1:1883\"\n"
                         "    - address: \"127.0.0.1:8883\"\n"
                         "      tls: {cert_file: a, key_file: b, ca_file: c, require_client_cert: yes}\n",
                         NULL);
    cr_assert_not_null(a, "%s", cfgt_err);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cfg_print(a, f);
    fclose(f);
    cr_assert_null(strstr(buf, "listener: \"0.0.0.0:1883\""), "mqtt.listener is not printed beside mqtt.listeners:\n%s", buf);
    static char *const empty_env[] = { NULL };
    cfg_t *b = NULL;
    cfg_load_string("printed", buf, len, empty_env, &b, cfgt_err, sizeof cfgt_err);
    cr_assert_not_null(b, "%s\n%s", cfgt_err, buf);
    ndiffs = 0;
    cfg_diff(a, b, collect, NULL);
    cr_assert_eq(ndiffs, 0, "%s differs once printed", diffs[0]);
    free(buf);
    cfg_free(a);
    cfg_free(b);
    /* without listeners: the printed file has none, and reads back as none */
    a = load_with("", NULL);
    f = open_memstream(&buf, &len);
    cfg_print(a, f);
    fclose(f);
    cfg_load_string("printed", buf, len, empty_env, &b, cfgt_err, sizeof cfgt_err);
    cr_assert_not_null(b, "%s\n%s", cfgt_err, buf);
    cr_assert_eq(b->mqtt.nlisteners, 0);
    free(buf);
    cfg_free(a);
    cfg_free(b);
}
