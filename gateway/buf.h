/*
 * buf.h: a growable byte buffer (internal to gateway/).
 *
 * The HTTP handlers and the metrics writers build response bodies with it;
 * the HTTP server hands the memory to uv_write and frees it in the write
 * callback. It is kept NUL-terminated (cap > len) so a body can be read as a
 * C string in tests and logs. Growth aborts on out-of-memory (tb_realloc):
 * every body is bounded by what it describes (a fixed set of topics and
 * metrics), never by input from the network.
 */
#ifndef GW_BUF_H
#define GW_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct gw_buf {
    char *data;  /* NULL until the first append; then NUL-terminated */
    size_t len;
    size_t cap;
} gw_buf_t;

#define GW_BUF_INIT { NULL, 0, 0 }

void gw_buf_append(gw_buf_t *b, const void *p, size_t n);
void gw_buf_puts(gw_buf_t *b, const char *s);
void gw_buf_putc(gw_buf_t *b, char c);
void gw_buf_printf(gw_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gw_buf_vprintf(gw_buf_t *b, const char *fmt, va_list ap);
/* Empties the buffer and keeps its memory. */
void gw_buf_reset(gw_buf_t *b);
/* Frees the memory; the buffer is empty (GW_BUF_INIT) afterwards. */
void gw_buf_free(gw_buf_t *b);
/* The contents as a C string ("" when nothing was appended). */
const char *gw_buf_str(const gw_buf_t *b);

#endif
