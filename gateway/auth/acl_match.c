/*
 * acl_match.c: an acl_file topic filter against a topic name, by MQTT's
 * rules, the way Mosquitto 2 applies them to ACLs:
 *   - '+' is one level (an empty one too), '#' the rest, including the
 *     parent: "a/#" matches "a";
 *   - a wildcard in the first level never matches a topic whose first
 *     level starts with '$': "#" and "+/x" do not give "$SYS/x", only a
 *     filter written with "$SYS" does (Mosquitto's topic_matches_sub; seen
 *     with mosquitto 2.0.11: `topic read #` delivers no $SYS message);
 *   - in pattern lines "%u" / "%c" are replaced by the user name / client
 *     id inside the level they are written in, as Mosquitto 2.0 does. The
 *     caller never substitutes a value holding '+', '#' or '/', so a value
 *     can neither become a wildcard nor span levels.
 * Level by level, no allocation: it runs per PUBLISH on the event loop.
 *
 * Ours rather than Mosquitto's: libmosquitto has no ACL code (auth.h).
 */
#include "gateway/auth/auth_int.h"

#include <string.h>

const char *auth__filter_invalid(const char *filter, size_t len)
{
    if (len == 0)
        return "empty topic";
    if (len > 65535)
        return "topic longer than 65535 bytes";
    for (size_t i = 0; i < len; i++) {
        char c = filter[i];
        if (c != '+' && c != '#')
            continue;
        bool starts = i == 0 || filter[i - 1] == '/';
        bool ends = i + 1 == len || filter[i + 1] == '/';
        if (!starts || !ends)
            return c == '+' ? "'+' must be a whole level" : "'#' must be a whole level";
        if (c == '#' && i + 1 != len)
            return "'#' must be the last level";
    }
    return NULL;
}

/* One filter level (no wildcard) against one topic level. */
static bool level_equal(const char *f, size_t fl, const char *t, size_t tl, bool subst, const char *user,
                        const char *client_id)
{
    size_t i = 0, j = 0;
    while (i < fl) {
        if (subst && f[i] == '%' && i + 1 < fl && (f[i + 1] == 'u' || f[i + 1] == 'c')) {
            const char *v = f[i + 1] == 'u' ? user : client_id;
            size_t vl = strlen(v);
            if (tl - j < vl || memcmp(t + j, v, vl) != 0)
                return false;
            j += vl;
            i += 2;
            continue;
        }
        if (j == tl || f[i] != t[j])
            return false;
        i++;
        j++;
    }
    return j == tl;
}

bool auth__filter_match(const char *filter, size_t flen, const char *topic, size_t tlen, bool subst,
                        const char *user, const char *client_id)
{
    bool dollar = tlen > 0 && topic[0] == '$';
    bool first = true, topic_done = false;
    size_t f = 0, t = 0;
    for (;;) {
        const char *fs = filter + f;
        const char *fslash = memchr(fs, '/', flen - f);
        size_t fl = fslash ? (size_t)(fslash - fs) : flen - f;
        if (fl == 1 && fs[0] == '#')
            return !(first && dollar);
        if (topic_done)
            return false;
        const char *ts = topic + t;
        const char *tslash = memchr(ts, '/', tlen - t);
        size_t tl = tslash ? (size_t)(tslash - ts) : tlen - t;
        if (fl == 1 && fs[0] == '+') {
            if (first && dollar)
                return false;
        } else if (!level_equal(fs, fl, ts, tl, subst, user, client_id)) {
            return false;
        }
        first = false;
        if (!fslash)
            return !tslash;
        f += fl + 1;
        if (tslash)
            t += tl + 1;
        else
            topic_done = true;
    }
}
