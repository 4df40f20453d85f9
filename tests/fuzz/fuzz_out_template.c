/* fuzz-lib: tb_router */
/*
 * fuzz_out_template.c: output topic templates and filters (issue 17,
 * docs/design/OUTPUTS.md 4.2). Compiles a fuzzed rule and a fuzzed
 * template, expands it for a fuzzed topic, and aborts if
 *  - compile accepted the template against the rule but an expansion for a
 *    topic the rule matched is not a valid MQTT topic name (wildcard, NUL,
 *    bad UTF-8, empty, over the cap);
 *  - the expansion disagrees with the naive oracle (router_out_oracle.h);
 *  - compile accepted it against the rule but refused its syntax alone;
 *  - router_filter_match and the oracle disagree on a filter that
 *    router_filter_check accepted.
 *
 * Input: line 1 the rule's mqtt_pattern (also used as a filter), line 2
 * the template, line 3 a flags byte ('L': ROUTER_OUT_LEVEL), then the topic
 * (the rest). The rule extracts attribute "a1" from $1 when it has a '+',
 * "rest" from $# when it ends in '#'; the message's attributes are the
 * rule's, as the broker would have stored them, plus "free" whose value is
 * the topic itself (not a capture: compile must refuse ${attr.free}).
 */
#include "tests/unit/gateway/router/router_out_oracle.h"

#include "base/base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                        \
    do {                                                        \
        if (!(cond)) {                                          \
            fprintf(stderr, "fuzz_out_template: " __VA_ARGS__); \
            fputc('\n', stderr);                                \
            abort();                                            \
        }                                                       \
    } while (0)

typedef struct fattrs {
    const router_t *r;
    const router_match_t *m;
    router_slice_t topic;
} fattrs_t;

static bool find_attr(void *arg, const char *name, size_t len, router_slice_t *v)
{
    const fattrs_t *a = arg;
    if (len == 4 && memcmp(name, "free", 4) == 0) {
        *v = a->topic;
        return true;
    }
    size_t it = 0;
    const char *n;
    router_slice_t val;
    while (router_attr_next(a->r, a->m, &it, &n, &val))
        if (strlen(n) == len && memcmp(n, name, len) == 0) {
            *v = val;
            return true;
        }
    return false;
}

/* Next line of data[*pos..size) into a NUL-terminated copy (embedded NULs cut it). */
static char *next_line(const uint8_t *data, size_t size, size_t *pos)
{
    size_t start = *pos, end = start;
    while (end < size && data[end] != '\n')
        end++;
    char *s = malloc(end - start + 1);
    memcpy(s, data + start, end - start);
    s[end - start] = 0;
    *pos = end < size ? end + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    size_t pos = 0;
    char *pattern = next_line(data, size, &pos);
    char *tmpl = next_line(data, size, &pos);
    char *flagline = next_line(data, size, &pos);
    const char *topic = (const char *)data + pos;
    size_t tlen = size - pos;
    unsigned flags = flagline[0] == 'L' ? ROUTER_OUT_LEVEL : 0;

    /* the filter half */
    if (router_filter_check(pattern, NULL, 0) == 0)
        CHECK(router_filter_match(pattern, topic, tlen) == oro_filter_match(pattern, topic, tlen),
              "filter \"%s\" on a %zu-byte topic: router and oracle disagree", pattern, tlen);

    /* the template half */
    router_attr_spec_t attrs[2];
    size_t nattrs = 0;
    if (strchr(pattern, '+'))
        attrs[nattrs++] = (router_attr_spec_t){ "a1", "$1" };
    size_t plen = strlen(pattern);
    if (plen && pattern[plen - 1] == '#')
        attrs[nattrs++] = (router_attr_spec_t){ "rest", "$#" };
    router_spec_t spec = { .mqtt_pattern = pattern, .danube_topic = "/fz/t", .attrs = attrs, .n_attrs = nattrs };
    router_t *r = NULL;
    if (router_compile(&spec, 1, &r, NULL, 0) != 0) {
        spec.n_attrs = 0; /* the attributes may be what it refused */
        if (router_compile(&spec, 1, &r, NULL, 0) != 0)
            r = NULL;
    }
    router_out_t *syn = NULL, *t = NULL;
    int rs = router_out_compile(NULL, tmpl, NULL, 0, flags, &syn, NULL, 0);
    if (r && router_out_compile(r, tmpl, NULL, 0, flags, &t, NULL, 0) == 0) {
        CHECK(rs == 0, "\"%s\" accepted against the rule, refused alone", tmpl);
        CHECK(!strstr(tmpl, "${attr.free}"), "\"%s\": an attribute that is not a capture was accepted", tmpl);
        router_match_t m;
        bool valid_topic = oro_topic_valid(topic, tlen);
        if (valid_topic && router_match(r, topic, tlen, &m) == 0) {
            fattrs_t fa = { r, &m, { topic, tlen } };
            router_out_ctx_t c = { .topic = { topic, tlen }, .upstream = { "/fz/t", 5 }, .m = &m,
                                   .attr = find_attr, .arg = &fa };
            static char buf[ROUTER_OUT_MAX];
            size_t cap = 1 + (size_t)(tlen % 97) * 8; /* small caps exercise ETOOLONG too */
            int n = router_out_expand(t, &c, buf, cap);
            char *o;
            int on = oro_expand(tmpl, &c, cap, &o);
            CHECK(n == on, "\"%s\": expand %d, oracle %d", tmpl, n, on);
            /* the rule has every value; only one level made of empty captures is refused per message */
            CHECK(n != ROUTER_OUT_EVALUE || (flags & ROUTER_OUT_LEVEL),
                  "\"%s\" on a topic its rule matched: no value (the rule has them all)", tmpl);
            if (n >= 0) {
                CHECK(memcmp(buf, o, (size_t)n) == 0, "\"%s\": bytes differ from the oracle", tmpl);
                CHECK(oro_topic_valid(buf, (size_t)n), "\"%s\": accepted, expanded to an invalid topic", tmpl);
                if (flags & ROUTER_OUT_LEVEL)
                    CHECK(!memchr(buf, '/', (size_t)n), "\"%s\": one level holds '/'", tmpl);
                free(o);
            }
            /* with room for any topic name: only a result past the MQTT limit is too long */
            n = router_out_expand(t, &c, buf, sizeof buf);
            on = oro_expand(tmpl, &c, sizeof buf, &o);
            CHECK(n == on, "\"%s\": expand %d, oracle %d with room", tmpl, n, on);
            CHECK(n >= 0 || n == ROUTER_OUT_ETOOLONG, "\"%s\": %d with room", tmpl, n);
            free(o);
        }
    }
    router_out_free(t);
    router_out_free(syn);
    router_free(r);
    free(pattern);
    free(tmpl);
    free(flagline);
    return 0;
}
