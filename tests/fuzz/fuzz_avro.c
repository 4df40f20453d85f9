/* fuzz-lib: tb_schema */
/*
 * fuzz_avro.c: the Avro validator (and the envelope/registry path that
 * feeds it) on arbitrary bytes.
 *
 * The first byte picks a mode:
 *   0-3  binary payload against one of four fixed schemas (a telemetry
 *        record with map/array/union/fixed; a recursive tree; a union of
 *        every type; arrays of maps of arrays), rest = payload;
 *   4-5  Avro JSON encoding against schemas 0 and 2, rest = JSON payload;
 *   6    rest = "<schema JSON>\0<payload>": compile, then validate the
 *        payload in both encodings;
 *   7    rest = a schema envelope, applied through the registry.
 *
 * Oracle for the fixed binary schemas: whatever our walker accepts, avro-c's
 * reader must also read, consuming every byte (our rules are a strict
 * superset of its checks). A disagreement aborts.
 */
#include <avro.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "schema/schema.h"

/* Each schema is one literal split over lines: parentheses tell clang's
 * -Wstring-concatenation that the joins are meant. */
static const char *const schemas[] = {
    ("{\"type\":\"record\",\"name\":\"Telemetry\",\"namespace\":\"edge\",\"fields\":["
    "{\"name\":\"device\",\"type\":\"string\"},{\"name\":\"ts\",\"type\":\"long\"},"
    "{\"name\":\"temp\",\"type\":\"double\"},{\"name\":\"ok\",\"type\":\"boolean\"},"
    "{\"name\":\"mode\",\"type\":{\"type\":\"enum\",\"name\":\"Mode\",\"symbols\":[\"A\",\"B\",\"C\"]}},"
    "{\"name\":\"tags\",\"type\":{\"type\":\"map\",\"values\":\"string\"}},"
    "{\"name\":\"samples\",\"type\":{\"type\":\"array\",\"items\":\"float\"}},"
    "{\"name\":\"note\",\"type\":[\"null\",\"string\"],\"default\":null},"
    "{\"name\":\"mac\",\"type\":{\"type\":\"fixed\",\"name\":\"Mac\",\"size\":6}}]}"),

    ("{\"type\":\"record\",\"name\":\"Node\",\"fields\":["
    "{\"name\":\"v\",\"type\":\"int\"},"
    "{\"name\":\"kids\",\"type\":{\"type\":\"array\",\"items\":\"Node\"}},"
    "{\"name\":\"attrs\",\"type\":{\"type\":\"map\",\"values\":[\"null\",\"long\",\"bytes\"]}}]}"),

    ("[\"null\",\"boolean\",\"int\",\"long\",\"float\",\"double\",\"bytes\",\"string\","
    "{\"type\":\"record\",\"name\":\"P\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"},"
    "{\"name\":\"y\",\"type\":\"int\",\"default\":0}]},"
    "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Y\"]},"
    "{\"type\":\"fixed\",\"name\":\"F\",\"size\":2},"
    "{\"type\":\"array\",\"items\":\"int\"},{\"type\":\"map\",\"values\":\"long\"}]"),

    ("{\"type\":\"array\",\"items\":{\"type\":\"map\",\"values\":"
     "{\"type\":\"array\",\"items\":\"string\"}}}"),
};
#define NSCHEMAS (sizeof schemas / sizeof schemas[0])

static sch_validator_t *bin[NSCHEMAS], *json[NSCHEMAS];
static avro_value_iface_t *ifaces[NSCHEMAS];

static void setup(void)
{
    char err[256];
    for (size_t i = 0; i < NSCHEMAS; i++) {
        sch_opts_t ob = { .avro_encoding = SCH_AVRO_BINARY };
        sch_opts_t oj = { .avro_encoding = SCH_AVRO_JSON };
        if (sch_compile(SCH_AVRO, schemas[i], strlen(schemas[i]), &ob, &bin[i], err, sizeof err) ||
            sch_compile(SCH_AVRO, schemas[i], strlen(schemas[i]), &oj, &json[i], err, sizeof err))
            abort();
        avro_schema_t s;
        if (avro_schema_from_json_length(schemas[i], strlen(schemas[i]), &s))
            abort();
        ifaces[i] = avro_generic_class_from_schema(s);
        avro_schema_decref(s);
    }
}

/* avro-c must read what we accepted, to the last byte. */
static void oracle(size_t i, const uint8_t *p, size_t n)
{
    avro_value_t v;
    avro_generic_value_new(ifaces[i], &v);
    avro_reader_t r = avro_reader_memory((const char *)p, (int64_t)n);
    int rc = avro_value_read(r, &v);
    char extra;
    int more = rc == 0 && avro_read(r, &extra, 1) == 0; /* a byte left over */
    avro_reader_free(r);
    avro_value_decref(&v);
    if (rc != 0 || more)
        abort();
}

static void schema_text_mode(const uint8_t *p, size_t n)
{
    const uint8_t *nul = memchr(p, 0, n);
    size_t slen = nul ? (size_t)(nul - p) : n;
    const uint8_t *payload = nul ? nul + 1 : p + n;
    size_t plen = nul ? n - slen - 1 : 0;
    char err[256];
    for (int enc = 0; enc < 2; enc++) {
        sch_opts_t o = { .avro_encoding = enc ? SCH_AVRO_JSON : SCH_AVRO_BINARY };
        sch_validator_t *v = NULL;
        if (sch_compile(SCH_AVRO, (const char *)p, slen, &o, &v, err, sizeof err) == 0) {
            sch_validate(v, payload, plen, err, sizeof err);
            sch_validator_unref(v);
        }
    }
}

static void envelope_mode(const uint8_t *p, size_t n)
{
    sch_registry_t *r = sch_registry_new(NULL);
    sch_resolved_t rs = { .subject = "s", .schema_id = 1, .schema_version = 1,
                          .definition = p, .definition_len = n };
    char err[256];
    sch_registry_apply(r, &rs, err, sizeof err);
    sch_lookup_t l;
    if (sch_registry_lookup(r, "s", &l, err, sizeof err) == 0) {
        sch_validate(l.validator, p, n, err, sizeof err);
        sch_validator_unref(l.validator);
    }
    sch_registry_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        tb_log_set_level(TB_LOG_OFF);
        setup();
        ready = 1;
    }
    if (size == 0)
        return 0;
    unsigned mode = data[0] % 8;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char err[256];
    if (mode < 4) {
        if (sch_validate(bin[mode], p, n, err, sizeof err) == 0)
            oracle(mode, p, n);
    } else if (mode < 6) {
        sch_validate(json[mode == 4 ? 0 : 2], p, n, err, sizeof err);
    } else if (mode == 6) {
        schema_text_mode(p, n);
    } else {
        envelope_mode(p, n);
    }
    return 0;
}
