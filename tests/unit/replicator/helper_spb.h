/*
 * helper_spb.h: the Sparkplug unit tests' two decoders of what we encode:
 * protobuf-c (generated from proto/sparkplug_b.proto) and Python protobuf
 * (tests/unit/replicator/spb_decode.py, a child process), both printed in
 * one canonical line (see spb_decode.py) so a test states the expected
 * payload once and checks it against each.
 */
#ifndef HELPER_SPB_H
#define HELPER_SPB_H

#include <stddef.h>
#include <stdint.h>

/* protobuf-c's reading, into a static buffer (valid until the next call). */
const char *spb_dump_c(const uint8_t *p, size_t len);

/* Python's reading of up to 16 payloads, one child for all; out[i] are
 * malloc'd lines (the caller frees). */
void spb_dump_py(const uint8_t *const *p, const size_t *len, size_t n, char **out);

/* Both readings equal `want` (the test fails otherwise, printing which). */
void spb_expect(const uint8_t *p, size_t len, const char *want);

#endif
