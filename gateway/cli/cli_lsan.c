/*
 * cli_lsan.c: LeakSanitizer suppressions for the tributary binary (read at
 * start-up in sanitizer builds only; without sanitizers nothing calls it).
 *
 * libcares (Debian 12's c-ares 1.18.1, under gRPC's default DNS resolver)
 * leaks one 10-byte block when ares_gethostbyname resolves "localhost":
 *   malloc <- libcares <- ares_getaddrinfo <- ares_gethostbyname
 *   <- grpc_core::PollingResolver::StartResolvingLocked
 *   <- grpc_channel_check_connectivity_state <- rep__chan_get
 * Measured: one allocation per process; 8 s of reconnecting to an absent
 * cluster did not grow it. It is not ours to fix, and it only matters to
 * the sanitizer: suppress that library's leaks, nothing else.
 */
const char *__lsan_default_suppressions(void);

const char *__lsan_default_suppressions(void)
{
    return "leak:libcares.so\n";
}
