/*
 * sch_json_format.c: the "format" checks used when formats are asserted.
 *
 * By default "format" is an annotation (both drafts say so); with
 * opts->format_assert, or a 2020-12 metaschema that requires the
 * format-assertion vocabulary, strings are checked against:
 *   date-time, date, time   RFC 3339 (leap second only at 23:59:60 UTC)
 *   duration                RFC 3339 appendix A (ISO 8601 durations)
 *   email                   RFC 5321 mailbox: dot-atom or quoted local part,
 *                           hostname or [IPv4] / [IPv6:...] literal domain
 *   hostname                RFC 1123 labels (ASCII)
 *   ipv4, ipv6              RFC 2673 dotted quad (no leading zeros), RFC 4291
 *   uri, uri-reference      RFC 3986 syntax; iri, iri-reference the same with
 *                           non-ASCII characters allowed (RFC 3987, loosely)
 *   uuid                    RFC 4122 8-4-4-4-12 hex
 *   json-pointer, relative-json-pointer, regex (our ECMA-262 dialect),
 *   uri-template            (RFC 6570: balanced, well-formed expressions)
 *   idn-email               email with UTF-8 allowed in the local part and
 *                           domain labels (IDNA2008 rules not applied)
 * Unknown formats and idn-hostname are never asserted (IDNA2008 needs
 * tables we do not carry), nor are A-labels (xn--) decoded for hostname.
 * Every check is a hand-written scanner over the bytes: no regex, no
 * allocation (except "regex", which compiles the pattern).
 */
#include "schema/sch_json.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static const struct {
    const char *name;
    sch_json_format_t f;
} formats[] = {
    { "date-time", SCH_JSON_FMT_DATE_TIME },       { "date", SCH_JSON_FMT_DATE },
    { "time", SCH_JSON_FMT_TIME },                 { "duration", SCH_JSON_FMT_DURATION },
    { "email", SCH_JSON_FMT_EMAIL },               { "hostname", SCH_JSON_FMT_HOSTNAME },
    { "ipv4", SCH_JSON_FMT_IPV4 },                 { "ipv6", SCH_JSON_FMT_IPV6 },
    { "uri", SCH_JSON_FMT_URI },                   { "uri-reference", SCH_JSON_FMT_URI_REFERENCE },
    { "iri", SCH_JSON_FMT_IRI },                   { "iri-reference", SCH_JSON_FMT_IRI_REFERENCE },
    { "uuid", SCH_JSON_FMT_UUID },                 { "json-pointer", SCH_JSON_FMT_JSON_POINTER },
    { "relative-json-pointer", SCH_JSON_FMT_REL_JSON_POINTER }, { "regex", SCH_JSON_FMT_REGEX },
    { "uri-template", SCH_JSON_FMT_URI_TEMPLATE }, { "idn-email", SCH_JSON_FMT_IDN_EMAIL },
};

sch_json_format_t sch__json_format_lookup(const char *name)
{
    for (size_t k = 0; k < TB_ARRAY_LEN(formats); k++)
        if (strcmp(formats[k].name, name) == 0) return formats[k].f;
    return SCH_JSON_FMT_UNKNOWN;
}

const char *sch__json_format_name(sch_json_format_t f)
{
    for (size_t k = 0; k < TB_ARRAY_LEN(formats); k++)
        if (formats[k].f == f) return formats[k].name;
    return "format";
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static bool is_hex(char c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

/* Reads exactly n digits at s[*i]. */
static bool digits(const char *s, size_t len, size_t *i, size_t n, int *out)
{
    if (len - *i < n) return false;
    int v = 0;
    for (size_t k = 0; k < n; k++) {
        if (!is_digit(s[*i + k])) return false;
        v = v * 10 + (s[*i + k] - '0');
    }
    *i += n;
    *out = v;
    return true;
}

static bool lit(const char *s, size_t len, size_t *i, char c)
{
    if (*i >= len || s[*i] != c) return false;
    (*i)++;
    return true;
}

/* ---- dates and times ------------------------------------------------------ */

static bool full_date(const char *s, size_t len, size_t *i)
{
    static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    int y, m, d;
    if (!digits(s, len, i, 4, &y) || !lit(s, len, i, '-') || !digits(s, len, i, 2, &m) || !lit(s, len, i, '-') ||
        !digits(s, len, i, 2, &d))
        return false;
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1]) return false;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return !(m == 2 && d == 29 && !leap);
}

static bool full_time(const char *s, size_t len, size_t *i)
{
    int h, m, sec, oh = 0, om = 0, sign = 0;
    if (!digits(s, len, i, 2, &h) || !lit(s, len, i, ':') || !digits(s, len, i, 2, &m) || !lit(s, len, i, ':') ||
        !digits(s, len, i, 2, &sec))
        return false;
    if (*i < len && s[*i] == '.') {
        (*i)++;
        size_t st = *i;
        while (*i < len && is_digit(s[*i])) (*i)++;
        if (*i == st) return false;
    }
    if (*i >= len) return false;
    if (s[*i] == 'Z' || s[*i] == 'z') {
        (*i)++;
    } else if (s[*i] == '+' || s[*i] == '-') {
        sign = s[*i] == '+' ? 1 : -1;
        (*i)++;
        if (!digits(s, len, i, 2, &oh) || !lit(s, len, i, ':') || !digits(s, len, i, 2, &om)) return false;
        if (oh > 23 || om > 59) return false;
    } else {
        return false;
    }
    if (h > 23 || m > 59 || sec > 60) return false;
    if (sec == 60) { /* a leap second is 23:59:60 in UTC */
        int utc = ((h * 60 + m - sign * (oh * 60 + om)) % 1440 + 1440) % 1440;
        if (utc != 23 * 60 + 59) return false;
    }
    return true;
}

static bool check_duration(const char *s, size_t len)
{
    /* "P" (date [time] | time | weeks), units in order, each at most once */
    size_t i = 0;
    if (!lit(s, len, &i, 'P') || i == len) return false;
    static const char date_units[] = "YMD", time_units[] = "HMS";
    const char *units = date_units;
    size_t next = 0;
    bool in_time = false, any = false, any_time = false;
    while (i < len) {
        if (s[i] == 'T') {
            if (in_time) return false;
            in_time = true;
            units = time_units;
            next = 0;
            i++;
            continue;
        }
        size_t st = i;
        while (i < len && is_digit(s[i])) i++;
        if (i == st || i == len) return false;
        char u = s[i++];
        if (u == 'W' && !in_time && !any && i == len) return true; /* "PnW" stands alone */
        size_t k = next;
        while (k < 3 && units[k] != u) k++;
        if (k == 3) return false;
        /* RFC 3339's grammar: Y [M [D]], H [M [S]] with no unit skipped */
        if (any && !in_time && k != next) return false;
        if (in_time && any_time && k != next) return false;
        next = k + 1;
        any = true;
        if (in_time) any_time = true;
    }
    return any && (!in_time || any_time);
}

/* ---- network names and addresses ------------------------------------------ */

static bool check_ipv4(const char *s, size_t len)
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part && !lit(s, len, &i, '.')) return false;
        size_t st = i;
        int v = 0;
        while (i < len && is_digit(s[i]) && i - st < 3) v = v * 10 + (s[i++] - '0');
        if (i == st || v > 255 || (i - st > 1 && s[st] == '0')) return false;
    }
    return i == len;
}

static bool check_ipv6(const char *s, size_t len)
{
    size_t i = 0;
    int groups = 0;
    bool gap = false;
    if (len >= 2 && s[0] == ':' && s[1] == ':') {
        gap = true;
        i = 2;
        if (i == len) return true;
    } else if (len && s[0] == ':') {
        return false;
    }
    while (i < len) {
        /* an embedded dotted quad ends the address */
        size_t e = i;
        while (e < len && s[e] != ':') e++;
        if (e == len && memchr(s + i, '.', len - i)) {
            if (!check_ipv4(s + i, len - i)) return false;
            groups += 2;
            i = len;
            break;
        }
        size_t st = i;
        while (i < len && is_hex(s[i]) && i - st < 4) i++;
        if (i == st) return false;
        groups++;
        if (i == len) break;
        if (s[i] != ':') return false;
        i++;
        if (i < len && s[i] == ':') {
            if (gap) return false;
            gap = true;
            i++;
            if (i == len) break;
        } else if (i == len) {
            return false;
        }
    }
    return gap ? groups < 8 : groups == 8;
}

static bool check_hostname(const char *s, size_t len)
{
    if (len == 0 || len > 253) return false;
    size_t i = 0;
    while (i < len) {
        size_t st = i;
        while (i < len && s[i] != '.') {
            if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '-') return false;
            i++;
        }
        size_t l = i - st;
        if (l == 0 || l > 63 || s[st] == '-' || s[i - 1] == '-') return false;
        /* "--" in the 3rd and 4th positions is reserved for A-labels (xn--) */
        if (l >= 4 && s[st + 2] == '-' && s[st + 3] == '-' && !((s[st] | 0x20) == 'x' && (s[st + 1] | 0x20) == 'n'))
            return false;
        if (i < len && ++i == len) return false; /* a trailing dot leaves an empty label */
    }
    return true;
}

static bool is_atext(char c, bool intl)
{
    return is_alpha(c) || is_digit(c) || (c && strchr("!#$%&'*+-/=?^_`{|}~", c)) || (intl && (unsigned char)c >= 0x80);
}

/* A hostname whose labels may also hold non-ASCII (UTF-8) characters: the
 * syntax of idn-email's domain, without IDNA2008's character rules. */
static bool check_intl_hostname(const char *s, size_t len)
{
    if (len == 0) return false;
    size_t st = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.') {
            if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '-' && (unsigned char)s[i] < 0x80) return false;
            continue;
        }
        if (i == st || s[st] == '-' || s[i - 1] == '-') return false;
        st = i + 1;
    }
    return true;
}

static bool check_email(const char *s, size_t len, bool intl)
{
    const char *at = NULL;
    size_t i = 0;
    if (len && s[0] == '"') { /* quoted local part */
        i = 1;
        while (i < len && s[i] != '"') {
            if (s[i] == '\\') i++;
            else if ((unsigned char)s[i] < 0x20) return false;
            i++;
        }
        if (i >= len) return false;
        i++;
        if (i >= len || s[i] != '@') return false;
        at = s + i;
    } else {
        size_t st = 0;
        for (; i < len && s[i] != '@'; i++) {
            if (s[i] == '.') {
                if (i == st || i + 1 >= len || s[i + 1] == '.' || s[i + 1] == '@') return false;
            } else if (!is_atext(s[i], intl)) {
                return false;
            }
        }
        if (i == 0 || i >= len) return false;
        at = s + i;
    }
    const char *d = at + 1;
    size_t dl = len - (size_t)(d - s);
    if (dl >= 2 && d[0] == '[' && d[dl - 1] == ']') {
        if (dl > 7 && strncmp(d + 1, "IPv6:", 5) == 0) return check_ipv6(d + 6, dl - 7);
        return check_ipv4(d + 1, dl - 2);
    }
    return intl ? check_intl_hostname(d, dl) : check_hostname(d, dl);
}

/* ---- URIs (RFC 3986 syntax; IRIs allow non-ASCII) ---------------------------- */

static bool uri_char(const char *s, size_t len, size_t *i, bool iri, const char *extra)
{
    unsigned char c = (unsigned char)s[*i];
    if (c == '%') {
        if (len - *i < 3 || !is_hex(s[*i + 1]) || !is_hex(s[*i + 2])) return false;
        *i += 3;
        return true;
    }
    if (c == 0) return false;
    if (is_alpha((char)c) || is_digit((char)c) || strchr("-._~!$&'()*+,;=", c) || (c && strchr(extra, c)) ||
        (iri && c >= 0x80)) {
        (*i)++;
        return true;
    }
    return false;
}

static bool uri_run(const char *s, size_t len, size_t *i, bool iri, const char *extra, const char *stop)
{
    while (*i < len && !strchr(stop, s[*i]))
        if (!uri_char(s, len, i, iri, extra)) return false;
    return true;
}

static bool uri_authority(const char *s, size_t len, size_t *i, bool iri)
{
    size_t e = *i;
    while (e < len && s[e] != '/' && s[e] != '?' && s[e] != '#') e++;
    const char *at = memchr(s + *i, '@', e - *i);
    if (at) {
        size_t ue = (size_t)(at - s);
        while (*i < ue)
            if (!uri_char(s, ue, i, iri, ":")) return false;
        (*i)++;
    }
    if (*i < e && s[*i] == '[') {
        const char *close = memchr(s + *i, ']', e - *i);
        if (!close) return false;
        size_t ce = (size_t)(close - s);
        bool future = (s[*i + 1] | 0x20) == 'v';
        if (!future && !check_ipv6(s + *i + 1, ce - *i - 1)) return false;
        *i = ce + 1;
    } else {
        while (*i < e && s[*i] != ':')
            if (!uri_char(s, e, i, iri, "")) return false;
    }
    if (*i < e && s[*i] == ':') {
        (*i)++;
        while (*i < e)
            if (!is_digit(s[(*i)++])) return false;
    }
    return *i == e;
}

static bool check_uri(const char *s, size_t len, bool iri, bool reference)
{
    size_t i = 0;
    while (i < len && (is_alpha(s[i]) || (i && (is_digit(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.'))))
        i++;
    bool scheme = i > 0 && i < len && s[i] == ':';
    if (scheme) i++;
    else if (!reference) return false;
    else i = 0;
    if (len - i >= 2 && s[i] == '/' && s[i + 1] == '/') {
        i += 2;
        if (!uri_authority(s, len, &i, iri)) return false;
    } else if (!scheme) {
        /* path-noscheme: no ':' before the first '/' */
        size_t e = i;
        while (e < len && s[e] != '/' && s[e] != '?' && s[e] != '#') e++;
        if (memchr(s + i, ':', e - i)) return false;
    }
    if (!uri_run(s, len, &i, iri, ":@/", "?#")) return false;
    if (i < len && s[i] == '?') {
        i++;
        if (!uri_run(s, len, &i, iri, ":@/?", "#")) return false;
    }
    if (i < len && s[i] == '#') {
        i++;
        if (!uri_run(s, len, &i, iri, ":@/?", "")) return false;
    }
    return i == len;
}

/* ---- the rest ----------------------------------------------------------------- */

static bool check_uuid(const char *s, size_t len)
{
    if (len != 36) return false;
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !is_hex(s[i])) return false;
    }
    return true;
}

static bool check_pointer(const char *s, size_t len)
{
    if (len && s[0] != '/') return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '~' && (i + 1 >= len || (s[i + 1] != '0' && s[i + 1] != '1'))) return false;
    return true;
}

static bool check_rel_pointer(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && is_digit(s[i])) i++;
    if (i == 0 || (i > 1 && s[0] == '0')) return false;
    if (i < len && (s[i] == '+' || s[i] == '-')) { /* index manipulation */
        size_t st = ++i;
        while (i < len && is_digit(s[i])) i++;
        if (i == st || (i - st > 1 && s[st] == '0') || (i - st == 1 && s[st] == '0')) return false;
    }
    if (i < len && s[i] == '#') return i + 1 == len;
    return check_pointer(s + i, len - i);
}

static bool check_regex(const char *s, size_t len)
{
    sch__json_regex_t *re;
    int rc = sch__json_regex_compile(s, len, &re, NULL, 0);
    sch__json_regex_free(re);
    return rc == 0 || rc == TB_EUNSUPPORTED;
}

/* RFC 6570: literals, and {[operator] varspec *("," varspec)} where
 * varspec = varname [":" 1*4DIGIT (no leading zero) / "*"]. */
static bool check_uri_template(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (len - i < 3 || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) return false;
            i += 3;
            continue;
        }
        if (c != '{') {
            if (c <= 0x20 || c == 0x7f || strchr("\"<>\\^`|}", c)) return false;
            i++;
            continue;
        }
        i++;
        if (i < len && s[i] && strchr("+#./;?&", s[i])) i++;
        for (;;) { /* one varspec */
            size_t st = i;
            while (i < len) {
                if (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '_') {
                    i++;
                } else if (s[i] == '%' && len - i >= 3 && is_hex(s[i + 1]) && is_hex(s[i + 2])) {
                    i += 3;
                } else if (s[i] == '.' && i > st && i + 1 < len && s[i + 1] != '.' && s[i + 1] != '}' &&
                           s[i + 1] != ',' && s[i + 1] != ':' && s[i + 1] != '*') {
                    i++;
                } else {
                    break;
                }
            }
            if (i == st || i >= len) return false;
            if (s[i] == '*') {
                i++;
            } else if (s[i] == ':') {
                size_t d = ++i;
                while (i < len && is_digit(s[i])) i++;
                if (i == d || i - d > 4 || s[d] == '0') return false;
            }
            if (i >= len) return false;
            if (s[i] == ',') {
                i++;
                continue;
            }
            if (s[i] != '}') return false;
            i++;
            break;
        }
    }
    return true;
}

bool sch__json_format_check(sch_json_format_t f, const char *s, size_t len)
{
    size_t i = 0;
    switch (f) {
    case SCH_JSON_FMT_DATE_TIME:
        if (!full_date(s, len, &i) || i >= len || (s[i] != 'T' && s[i] != 't')) return false;
        i++;
        return full_time(s, len, &i) && i == len;
    case SCH_JSON_FMT_DATE: return full_date(s, len, &i) && i == len;
    case SCH_JSON_FMT_TIME: return full_time(s, len, &i) && i == len;
    case SCH_JSON_FMT_DURATION: return check_duration(s, len);
    case SCH_JSON_FMT_EMAIL: return check_email(s, len, false);
    case SCH_JSON_FMT_IDN_EMAIL: return check_email(s, len, true);
    case SCH_JSON_FMT_HOSTNAME: return check_hostname(s, len);
    case SCH_JSON_FMT_IPV4: return check_ipv4(s, len);
    case SCH_JSON_FMT_IPV6: return check_ipv6(s, len);
    case SCH_JSON_FMT_URI: return check_uri(s, len, false, false);
    case SCH_JSON_FMT_URI_REFERENCE: return check_uri(s, len, false, true);
    case SCH_JSON_FMT_IRI: return check_uri(s, len, true, false);
    case SCH_JSON_FMT_IRI_REFERENCE: return check_uri(s, len, true, true);
    case SCH_JSON_FMT_UUID: return check_uuid(s, len);
    case SCH_JSON_FMT_JSON_POINTER: return check_pointer(s, len);
    case SCH_JSON_FMT_REL_JSON_POINTER: return check_rel_pointer(s, len);
    case SCH_JSON_FMT_REGEX: return check_regex(s, len);
    case SCH_JSON_FMT_URI_TEMPLATE: return check_uri_template(s, len);
    default: return true;
    }
}
