/*
 * buf.c: the growable byte buffer of base.h (tb_buf_t). Capacity doubles, so building a
 * body of n bytes costs O(n) copies; one spare byte keeps it NUL-terminated.
 */
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(tb_buf_t *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    b->data = tb_realloc(b->data, cap);
    b->cap = cap;
}

void tb_buf_append(tb_buf_t *b, const void *p, size_t n)
{
    reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void tb_buf_puts(tb_buf_t *b, const char *s)
{
    tb_buf_append(b, s, strlen(s));
}

void tb_buf_putc(tb_buf_t *b, char c)
{
    if (b->len + 2 > b->cap) /* the byte and the NUL */
        reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void tb_buf_vprintf(tb_buf_t *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n < sizeof tmp) {
        tb_buf_append(b, tmp, (size_t)n);
    } else {
        reserve(b, (size_t)n);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void tb_buf_printf(tb_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void tb_buf_reset(tb_buf_t *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void tb_buf_free(tb_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

const char *tb_buf_str(const tb_buf_t *b)
{
    return b->data ? b->data : "";
}
