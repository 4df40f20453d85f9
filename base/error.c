/* error.c: one strerror for -errno and the project's own TB_E* range. */
#include "base/base.h"

#include <string.h>

const char *tb_strerror(int rc)
{
    switch (rc) {
    case 0: return "ok";
    case TB_EMALFORMED: return "malformed input";
    case TB_ECORRUPT: return "corrupt data";
    case TB_ESCHEMA: return "schema does not compile";
    case TB_EINVALID: return "payload fails validation";
    case TB_ECONFIG: return "invalid configuration";
    case TB_EPROTO: return "protocol error";
    case TB_ENOTREADY: return "topic not ready";
    case TB_EFULL: return "bound reached";
    case TB_ECLOSED: return "closed";
    case TB_EUNSUPPORTED: return "not supported";
    case TB_EBUSY: return "not drained yet";
    default: break;
    }
    if (rc < 0 && rc > -4096)
        return strerror(-rc);
    return "unknown error";
}
