#!/usr/bin/python3
"""check_layout.py: the architecture's rules, checked against the code.

Run by ctest (test `layout`, tests/CMakeLists.txt) in every build; by hand:
  /usr/bin/python3 scripts/check_layout.py --source . [--pure NAME=LIB.a ... --base LIBBASE.a --binary FILE ...]

1. Who may include whom. docs/ARCHITECTURE.md holds the table (between
   the `layout-rules` markers): each folder, and the project folders its
   files may include headers from. Every `#include "folder/..."` of every
   .c and .h file is held against it, so the picture a newcomer reads is
   the one the code keeps.
2. Internal headers stay inside. A header named *_int.h or *_internal.h
   may be included only by files of its own folder and by that folder's
   own unit tests (tests/unit/<the same path>/).
3. libssl stays where the table says. <openssl/ssl.h> is included only by
   the folders whose row names libssl among its external libraries
   (gateway/tls for every server, the CLI for its HTTPS client), so TLS
   has one engine (tests, benchmarks and tools may include it).
4. Pure libraries link nothing but base and libc. For each --pure library
   (tb_mqtt, tb_router, tb_http_parse), every symbol its objects leave
   undefined must be defined by itself, by base, or by glibc (libc, libm);
   sanitizer and coverage hooks are allowed in instrumented builds. Each
   --binary (the fuzz targets of those libraries) may need no shared
   library but glibc's and the sanitizers'.

Exit 0 when every rule holds, 1 with one line per violation otherwise.
"""
import argparse
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SSL_INCLUDE = re.compile(r'^\s*#\s*include\s+<openssl/ssl\.h>', re.M)
INTERNAL = re.compile(r"(_int|_internal)\.h$")
SKIP_DIRS = {"build", ".git", "data", "corpus", "node_modules"}
SANITIZER = re.compile(r"^(__asan|__ubsan|__lsan|__sanitizer|__msan|__tsan|__sancov|__start___sancov|__stop___sancov)")
GLIBC = ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6",
         "/lib/aarch64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libm.so.6")
ALLOWED_NEEDED = re.compile(r"^(libc|libm|libasan|libubsan|libgcc_s|ld-linux[-\w]*)\.so")


def table_rows(src):
    """[(folder, cells)] of docs/ARCHITECTURE.md's marked table."""
    path = os.path.join(src, "docs", "ARCHITECTURE.md")
    text = open(path, encoding="utf-8").read()
    m = re.search(r"<!-- layout-rules -->(.*?)<!-- /layout-rules -->", text, re.S)
    if not m:
        sys.exit(f"{path}: no <!-- layout-rules --> table")
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        rows.append((cells[0].strip("`").rstrip("/"), cells))
    if not rows:
        sys.exit(f"{path}: the layout-rules table has no rows")
    return rows


def rules_from_docs(src):
    """{folder: set(folders it may include)} from docs/ARCHITECTURE.md's marked table."""
    return {folder: {tok.rstrip("/") for tok in re.findall(r"`([^`]+)`", cells[3])}
            for folder, cells in table_rows(src)}


def libssl_folders(src):
    """The folders whose row names libssl among its external libraries."""
    return {folder for folder, cells in table_rows(src) if len(cells) > 4 and "libssl" in cells[4]}


def check_libssl(src, rules, allowed):
    bad = []
    folders = list(rules)
    for path in source_files(src):
        me = owner(path, folders)
        if me is None or me in allowed:
            continue  # tests, bench and tools; the folders the table lets
        text = open(os.path.join(src, path), encoding="utf-8", errors="replace").read()
        if SSL_INCLUDE.search(text):
            bad.append(f"{path}: includes <openssl/ssl.h>, but {me}/'s row of docs/ARCHITECTURE.md's layout "
                       f"table does not name libssl (server TLS goes through gateway/tls/tls.h)")
    return bad


def source_files(src):
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for f in files:
            if f.endswith((".c", ".h")):
                p = os.path.join(root, f)
                yield os.path.relpath(p, src)


def owner(path, folders):
    """The deepest rule folder that holds path (None: not a library folder)."""
    best = None
    for f in folders:
        if path.startswith(f + "/") and (best is None or len(f) > len(best)):
            best = f
    return best


def check_includes(src, rules):
    bad = []
    folders = list(rules)
    for path in source_files(src):
        text = open(os.path.join(src, path), encoding="utf-8", errors="replace").read()
        me = owner(path, folders)
        for inc in INCLUDE.findall(text):
            target = owner(inc, folders)
            if target is None:
                continue  # a local "helper.h" or a generated header (proto/)
            inc_dir = os.path.dirname(inc)
            if INTERNAL.search(inc):
                here = os.path.dirname(path)
                if here != inc_dir and here != os.path.join("tests", "unit", inc_dir):
                    bad.append(f"{path}: includes {inc}, the internal header of {inc_dir}/ "
                               f"(only {inc_dir}/ and tests/unit/{inc_dir}/ may)")
                continue
            if me is None or target == me:
                continue  # tests, bench and tools may use any public header; a folder its own
            if target not in rules[me]:
                bad.append(f"{path}: {me}/ may not include {inc} ({target}/ is not in its row of "
                           f"docs/ARCHITECTURE.md's layout table)")
    return bad


def nm(path, *flags):
    out = subprocess.run(["nm", "--format=posix", *flags, path], capture_output=True, text=True, check=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not parts[0].endswith(":") and not line.endswith(":"):
            syms.add(parts[0].split("@")[0])
    return syms


def check_pure(pure, base):
    bad = []
    glibc = set()
    for lib in GLIBC:
        if os.path.exists(lib):
            glibc |= nm(lib, "-D", "--defined-only")
    if not glibc:
        return ["cannot read glibc's symbols (nm -D on libc.so.6)"]
    base_defs = nm(base, "--defined-only")
    for name, lib in pure:
        defs = nm(lib, "--defined-only")
        undef = nm(lib, "-u")
        for s in sorted(undef - defs - base_defs - glibc):
            if SANITIZER.match(s):
                continue
            bad.append(f"{name} ({lib}) uses {s}, which neither it, base nor glibc defines")
    return bad


def check_binaries(binaries):
    bad = []
    for b in binaries:
        out = subprocess.run(["readelf", "-d", b], capture_output=True, text=True, check=True).stdout
        for need in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out):
            if not ALLOWED_NEEDED.match(need):
                bad.append(f"{b} needs {need}: a pure library's binary links only glibc")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--pure", action="append", default=[], metavar="NAME=LIB.a")
    ap.add_argument("--base", help="libtb_base.a (with --pure)")
    ap.add_argument("--binary", action="append", default=[])
    a = ap.parse_args()
    src = os.path.abspath(a.source)
    rules = rules_from_docs(src)
    bad = check_includes(src, rules)
    bad += check_libssl(src, rules, libssl_folders(src))
    if a.pure:
        if not a.base:
            sys.exit("--pure needs --base")
        bad += check_pure([p.split("=", 1) for p in a.pure], a.base)
    bad += check_binaries(a.binary)
    for b in bad:
        print(b)
    checked = f"{len(rules)} folders, {len(a.pure)} pure libraries, {len(a.binary)} binaries"
    print(f"layout: {'OK' if not bad else f'{len(bad)} violations'} ({checked})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
