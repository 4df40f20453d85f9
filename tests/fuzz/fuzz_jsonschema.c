/* fuzz-lib: tb_schema */
/*
 * fuzz_jsonschema.c: JSON Schema compile + validate on hostile input.
 *
 * Both halves come from outside in production (schema text from the cluster
 * registry, the payload from a device), so both are fuzzed. Input layout:
 *   byte 0      flags: bit 0 asserts formats, bit 1 makes draft 7 the default
 *   bytes 1..   "<schema text>\0<payload>"; without a NUL the same bytes
 *               serve as both (a schema validating itself)
 * A remote document is offered at http://localhost:1234/r.json so the
 * resolver path is reached too. Any crash, leak, sanitizer report or hang
 * is a finding; rejections are expected.
 */
#include <stdint.h>
#include <string.h>

#include "schema/sch_json.h"

static const char remote[] =
    "{\"$id\":\"http://localhost:1234/r.json\",\"$defs\":{\"n\":{\"type\":\"integer\",\"$anchor\":\"n\"},"
    "\"t\":{\"$dynamicAnchor\":\"t\",\"items\":{\"$dynamicRef\":\"#t\"}}},\"type\":\"object\"}";

static const char *resolve(void *arg, const char *uri, size_t *len)
{
    (void)arg;
    if (strcmp(uri, "http://localhost:1234/r.json") != 0) return NULL;
    *len = sizeof remote - 1;
    return remote;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t flags = data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    const char *nul = memchr(text, '\0', n);
    size_t slen = nul ? (size_t)(nul - text) : n;
    const uint8_t *payload = nul ? (const uint8_t *)nul + 1 : (const uint8_t *)text;
    size_t plen = nul ? n - slen - 1 : n;

    sch_opts_t opts = { .format_assert = flags & 1, .resolve = resolve };
    sch_json_draft_t draft = (flags & 2) ? SCH_JSON_DRAFT7 : SCH_JSON_DRAFT2020;
    char err[256];
    sch__json_t *s = NULL;
    if (sch__json_compile_draft(text, slen, &opts, draft, &s, err, sizeof err) != 0) return 0;
    sch__json_validate(s, payload, plen, err, sizeof err);
    sch__json_free(s);
    return 0;
}
