/* fuzz-lib: tb_http_parse */
/*
 * fuzz_http_request.c: the request head parser reads bytes from anyone who
 * can reach the HTTP port. Feeds the input to http_head_end in the
 * pieces a slow client would send (so the resumable scan is exercised) and
 * then to http_parse, and checks what a caller relies on: the head end
 * is the same however the bytes arrived, a parse returns 0 or a status the
 * server knows how to send, and a parsed path starts with '/' and lies
 * inside the buffer; the query's decimal parameters (http_query_u64) are
 * read without running past it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';

    size_t whole = http_head_end(buf, size, 0), piecewise = 0;
    size_t step = size ? (size_t)data[0] % 7 + 1 : 1;
    for (size_t len = step; !piecewise; len += step) {
        if (len > size)
            len = size;
        piecewise = http_head_end(buf, len, len > step ? len - step : 0);
        if (len == size)
            break;
    }
    if (whole != piecewise || whole > size)
        abort();
    if (whole) {
        http_req_t req;
        int rc = http_parse(buf, whole, &req);
        if (rc != 0 && rc != 400 && rc != 413 && rc != 505)
            abort();
        if (rc == 0) {
            if (req.path < buf || req.path >= buf + whole || req.path[0] != '/')
                abort();
            if (req.method != HTTP_GET && req.method != HTTP_HEAD && req.method != HTTP_POST &&
                req.method != HTTP_OTHER)
                abort();
            if (req.minor != 0 && req.minor != 1)
                abort();
            (void)strlen(req.query);
            /* the admin API's parameters (GET /admin/dlq?from=N&limit=K ...) */
            const char *keys[] = { "from", "to", "limit", "offset", "" };
            for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
                uint64_t v = 12345;
                bool got = http_query_u64(req.query, keys[k], &v);
                if (!got && v != 12345)
                    abort(); /* written only when found */
            }
        }
    }
    free(buf);
    return 0;
}
