/*
 * config_value.c: turning one YAML scalar into a typed value.
 *
 * Shared by the file, the defaults and the TRIBUTARY_* environment
 * overrides, so a value means the same wherever it comes from. Each
 * converter writes a message that says what was expected.
 */
#include "config/config_int.h"
#include "base/base.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parses an unsigned decimal integer with an optional binary size suffix
 * (KiB, MiB, GiB, TiB; also K/M/G/T and KB/MB/GB as the same powers of two). */
static int parse_u64(const char *s, bool allow_suffix, uint64_t *out, char *msg, size_t msglen)
{
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p)) {
        snprintf(msg, msglen, "expected a non-negative integer%s, got \"%s\"",
                 allow_suffix ? " (optionally with KiB, MiB or GiB)" : "", s);
        return TB_ECONFIG;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno == ERANGE) {
        snprintf(msg, msglen, "number \"%s\" is too large", s);
        return TB_ECONFIG;
    }
    while (isspace((unsigned char)*end)) end++;
    uint64_t mult = 1;
    if (*end && allow_suffix) {
        static const struct { const char *sfx; uint64_t m; } sfx[] = {
            { "KiB", 1ull << 10 }, { "MiB", 1ull << 20 }, { "GiB", 1ull << 30 }, { "TiB", 1ull << 40 },
            { "KB", 1ull << 10 },  { "MB", 1ull << 20 },  { "GB", 1ull << 30 },  { "TB", 1ull << 40 },
            { "K", 1ull << 10 },   { "M", 1ull << 20 },   { "G", 1ull << 30 },   { "T", 1ull << 40 },
            { "B", 1 },
        };
        size_t i;
        for (i = 0; i < TB_ARRAY_LEN(sfx); i++)
            if (strcasecmp(end, sfx[i].sfx) == 0)
                break;
        if (i == TB_ARRAY_LEN(sfx)) {
            snprintf(msg, msglen, "unknown size suffix \"%s\" (use KiB, MiB or GiB)", end);
            return TB_ECONFIG;
        }
        mult = sfx[i].m;
    } else if (*end) {
        snprintf(msg, msglen, "expected an integer, got \"%s\"", s);
        return TB_ECONFIG;
    }
    if (v > UINT64_MAX / mult) {
        snprintf(msg, msglen, "number \"%s\" is too large", s);
        return TB_ECONFIG;
    }
    *out = v * mult;
    return 0;
}

/* A duration in milliseconds: an unsigned integer with ms, s, m, h or d
 * (a bare number is milliseconds). */
static int parse_duration(const char *s, uint64_t *out, char *msg, size_t msglen)
{
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p)) {
        snprintf(msg, msglen, "expected a duration (500ms, 45s, 30m, 12h, 7d), got \"%s\"", s);
        return TB_ECONFIG;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno == ERANGE) {
        snprintf(msg, msglen, "duration \"%s\" is too large", s);
        return TB_ECONFIG;
    }
    while (isspace((unsigned char)*end)) end++;
    static const struct { const char *sfx; uint64_t m; } sfx[] = {
        { "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "d", 86400000 },
    };
    size_t i;
    for (i = 0; i < TB_ARRAY_LEN(sfx); i++)
        if (strcmp(end, sfx[i].sfx) == 0)
            break;
    if (i == TB_ARRAY_LEN(sfx)) {
        snprintf(msg, msglen, "unknown duration unit \"%s\" in \"%s\" (use ms, s, m, h or d)", end, s);
        return TB_ECONFIG;
    }
    if (v > UINT64_MAX / sfx[i].m) {
        snprintf(msg, msglen, "duration \"%s\" is too large", s);
        return TB_ECONFIG;
    }
    *out = v * sfx[i].m;
    return 0;
}

/* "N%" or "N.D%" (one decimal), in tenths of a percent. Returns 1 when s is
 * no percentage at all (so it is read as a size), 0, or TB_ECONFIG. */
static int parse_percent(const char *s, uint32_t *permille, char *msg, size_t msglen)
{
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    const char *pct = strchr(p, '%');
    if (!pct)
        return 1;
    uint64_t whole = 0, tenth = 0;
    const char *q = p;
    if (!isdigit((unsigned char)*q))
        goto bad;
    while (isdigit((unsigned char)*q)) {
        whole = whole * 10 + (uint64_t)(*q++ - '0');
        if (whole > 100)
            goto range;
    }
    if (*q == '.') {
        q++;
        if (!isdigit((unsigned char)*q))
            goto bad;
        tenth = (uint64_t)(*q++ - '0');
        if (isdigit((unsigned char)*q)) {
            snprintf(msg, msglen, "\"%s\": a percentage takes at most one decimal (0.5%%)", s);
            return TB_ECONFIG;
        }
    }
    while (isspace((unsigned char)*q)) q++;
    if (q != pct)
        goto bad;
    for (q = pct + 1; isspace((unsigned char)*q); q++) {}
    if (*q)
        goto bad;
    if (whole * 10 + tenth > CFG__SPACE_MAX_PERMILLE)
        goto range;
    *permille = (uint32_t)(whole * 10 + tenth);
    return 0;
bad:
    snprintf(msg, msglen, "expected a size (64MiB) or a percentage (2%%, 0.5%%), got \"%s\"", s);
    return TB_ECONFIG;
range:
    snprintf(msg, msglen, "percentage out of range: \"%s\" is not within 0%%..%u%%", s, CFG__SPACE_MAX_PERMILLE / 10);
    return TB_ECONFIG;
}

static int check_addr(const char *s, char *msg, size_t msglen)
{
    const char *colon;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':') {
            snprintf(msg, msglen, "expected [ipv6]:port, got \"%s\"", s);
            return TB_ECONFIG;
        }
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s || memchr(s, ':', (size_t)(colon - s))) {
            snprintf(msg, msglen, "expected host:port (IPv6 as [addr]:port), got \"%s\"", s);
            return TB_ECONFIG;
        }
    }
    uint64_t port;
    char tmp[64];
    if (parse_u64(colon + 1, false, &port, tmp, sizeof tmp) < 0 || port > 65535) {
        snprintf(msg, msglen, "port must be 0..65535 in \"%s\"", s);
        return TB_ECONFIG;
    }
    return 0;
}

static int check_url(const char *s, char *msg, size_t msglen)
{
    const char *rest;
    if (strncmp(s, "http://", 7) == 0) rest = s + 7;
    else if (strncmp(s, "https://", 8) == 0) rest = s + 8;
    else {
        snprintf(msg, msglen, "expected http://host:port or https://host:port, got \"%s\"", s);
        return TB_ECONFIG;
    }
    char hostport[512];
    size_t n = strcspn(rest, "/");
    if (n == 0 || n >= sizeof hostport || (rest[n] == '/' && rest[n + 1] != '\0')) {
        snprintf(msg, msglen, "expected http(s)://host:port with no path, got \"%s\"", s);
        return TB_ECONFIG;
    }
    memcpy(hostport, rest, n);
    hostport[n] = '\0';
    if (!strchr(hostport, ':') || hostport[n - 1] == ']') {
        snprintf(msg, msglen, "cluster URL must name a port, got \"%s\"", s);
        return TB_ECONFIG;
    }
    return check_addr(hostport, msg, msglen);
}

/* Sets the field described by `k` in `base` from scalar text `s`. */
int cfg__set_scalar(const cfg__key_t *k, void *base, const char *s, char *msg, size_t msglen)
{
    char *field = (char *)base + k->off;
    uint64_t v;
    switch (k->type) {
    case CFG__STR:
    case CFG__ADDR:
    case CFG__URL: {
        size_t len = strlen(s);
        if (len < k->min || (k->max && len > k->max)) {
            snprintf(msg, msglen, "length must be %llu..%llu characters, got %zu",
                     (unsigned long long)k->min, (unsigned long long)k->max, len);
            return TB_ECONFIG;
        }
        if (k->type == CFG__ADDR && check_addr(s, msg, msglen) < 0) return TB_ECONFIG;
        if (k->type == CFG__URL && check_url(s, msg, msglen) < 0) return TB_ECONFIG;
        char **dst = (char **)field;
        free(*dst);
        *dst = tb_strdup(s);
        return 0;
    }
    case CFG__BOOL: {
        static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false", "no", "off", "0" };
        for (size_t i = 0; i < 4; i++) {
            if (strcasecmp(s, yes[i]) == 0) { *(bool *)field = true; return 0; }
            if (strcasecmp(s, no[i]) == 0) { *(bool *)field = false; return 0; }
        }
        snprintf(msg, msglen, "expected true or false, got \"%s\"", s);
        return TB_ECONFIG;
    }
    case CFG__U32:
    case CFG__MS:
    case CFG__U64:
    case CFG__BYTES:
        if (parse_u64(s, k->type == CFG__BYTES, &v, msg, msglen) < 0)
            return TB_ECONFIG;
        if (v < k->min || v > k->max) {
            snprintf(msg, msglen, "%s out of range: %llu is not within %llu..%llu", cfg__type_name(k),
                     (unsigned long long)v, (unsigned long long)k->min, (unsigned long long)k->max);
            return TB_ECONFIG;
        }
        if (k->type == CFG__U32 || k->type == CFG__MS) *(uint32_t *)field = (uint32_t)v;
        else *(uint64_t *)field = v;
        return 0;
    case CFG__DURATION:
        if (parse_duration(s, &v, msg, msglen) < 0)
            return TB_ECONFIG;
        if (v < k->min || v > k->max) {
            snprintf(msg, msglen, "duration out of range: %llu ms is not within %llu..%llu ms", (unsigned long long)v,
                     (unsigned long long)k->min, (unsigned long long)k->max);
            return TB_ECONFIG;
        }
        *(uint64_t *)field = v;
        return 0;
    case CFG__SPACE: {
        uint32_t permille = 0;
        int rc = parse_percent(s, &permille, msg, msglen);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            *(cfg_space_t *)field = (cfg_space_t){ .bytes = 0, .permille = permille };
            return 0;
        }
        if (parse_u64(s, true, &v, msg, msglen) < 0) {
            snprintf(msg, msglen, "expected a size (64MiB) or a percentage (2%%, 0.5%%), got \"%s\"", s);
            return TB_ECONFIG;
        }
        if (v < k->min || v > k->max) {
            snprintf(msg, msglen, "bytes out of range: %llu is not within %llu..%llu", (unsigned long long)v,
                     (unsigned long long)k->min, (unsigned long long)k->max);
            return TB_ECONFIG;
        }
        *(cfg_space_t *)field = (cfg_space_t){ .bytes = v, .permille = 0 };
        return 0;
    }
    case CFG__ENUM:
        for (int i = 0; k->enums[i]; i++) {
            if (strcmp(s, k->enums[i]) == 0) {
                *(int *)field = i;
                return 0;
            }
        }
        {
            size_t off = (size_t)snprintf(msg, msglen, "expected one of");
            for (int i = 0; k->enums[i] && off < msglen; i++)
                off += (size_t)snprintf(msg + off, msglen - off, "%s %s", i ? "," : "", k->enums[i]);
            if (off < msglen) snprintf(msg + off, msglen - off, "; got \"%s\"", s);
        }
        return TB_ECONFIG;
    default:
        snprintf(msg, msglen, "expected a %s, got a scalar", cfg__type_name(k));
        return TB_ECONFIG;
    }
}

/*
 * Replaces ${NAME} from `envp` (NAME = [A-Za-z_][A-Za-z0-9_]*). Anything
 * else after "${" (a capture like ${1} or ${#}) is copied unchanged.
 * Returns a new string, or NULL with msg set when a variable is unset.
 */
/* ${topic} and ${upstream}: a template's own placeholders (name at p, nlen bytes). */
static bool template_name(const char *p, size_t nlen)
{
    return (nlen == 5 && memcmp(p, "topic", 5) == 0) || (nlen == 8 && memcmp(p, "upstream", 8) == 0);
}

char *cfg__expand_env(const char *s, char *const *envp, bool template, char *msg, size_t msglen)
{
    size_t cap = strlen(s) + 1, len = 0;
    char *out = tb_malloc(cap);
    for (const char *p = s; *p;) {
        if (p[0] == '$' && p[1] == '{' && (isalpha((unsigned char)p[2]) || p[2] == '_')) {
            const char *q = p + 2;
            while (isalnum((unsigned char)*q) || *q == '_') q++;
            if (*q == '}' && !(template && template_name(p + 2, (size_t)(q - (p + 2))))) {
                size_t nlen = (size_t)(q - (p + 2));
                const char *val = NULL;
                for (char *const *e = envp; e && *e; e++) {
                    if (strncmp(*e, p + 2, nlen) == 0 && (*e)[nlen] == '=') {
                        val = *e + nlen + 1;
                        break;
                    }
                }
                if (!val) {
                    snprintf(msg, msglen, "environment variable %.*s is not set", (int)nlen, p + 2);
                    free(out);
                    return NULL;
                }
                size_t vlen = strlen(val);
                if (len + vlen + 1 > cap) {
                    cap = (len + vlen + 1) * 2;
                    out = tb_realloc(out, cap);
                }
                memcpy(out + len, val, vlen);
                len += vlen;
                p = q + 1;
                continue;
            }
        }
        if (len + 2 > cap) {
            cap *= 2;
            out = tb_realloc(out, cap);
        }
        out[len++] = *p++;
    }
    out[len] = '\0';
    return out;
}
