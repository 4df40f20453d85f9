/* bench-lib: PkgConfig::GRPC Threads::Threads */
/*
 * bench_grpc_waker.c: the two facts behind the replicator's waker
 * (replicator/rep_thread.c), measured rather than assumed:
 *
 *   1. a call that only has RECV_STATUS_ON_CLIENT started never makes its
 *      channel connect: the channel targets a socket we listen on, and after
 *      every wake the listener is checked for a pending connection;
 *   2. what one wake costs: park a call, cancel it, take its tag from the
 *      queue, unreference it, on one thread; and the same with the cancel
 *      coming from a second thread (the cross-thread wake-up of the queue).
 *
 *   bench_grpc_waker [N=100000]
 * Prints "same-thread us_per_wake=..", "cross-thread wakes=.. us_per_wake=..",
 * "connection_attempts=..".
 */
#include <arpa/inet.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static grpc_channel *ch;
static grpc_completion_queue *cq;
static grpc_metadata_array md;
static grpc_status_code st;
static grpc_slice det;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static grpc_call *parked;
static long n_wakes = 100000;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static grpc_call *park(void)
{
    grpc_call *c = grpc_channel_create_call(ch, NULL, 0, cq, grpc_slice_from_static_string("/x/Park"), NULL,
                                            gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_metadata_array_init(&md);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op.data.recv_status_on_client.trailing_metadata = &md;
    op.data.recv_status_on_client.status = &st;
    op.data.recv_status_on_client.status_details = &det;
    if (grpc_call_start_batch(c, &op, 1, (void *)1, NULL) != GRPC_CALL_OK)
        abort();
    return c;
}

static void done(void)
{
    grpc_slice_unref(det);
    grpc_metadata_array_destroy(&md);
}

static void *canceller(void *arg)
{
    volatile int *stop = arg;
    while (!*stop) {
        pthread_mutex_lock(&mu);
        if (parked)
            grpc_call_cancel(parked, NULL);
        pthread_mutex_unlock(&mu);
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_wakes = atol(argv[1]);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
    socklen_t sl = sizeof sa;
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 8) < 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) < 0)
        return 1;
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", ntohs(sa.sin_port));
    grpc_init();
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    ch = grpc_channel_create(target, cr, NULL);
    grpc_channel_credentials_release(cr);
    cq = grpc_completion_queue_create_for_next(NULL);

    double t0 = now();
    for (long i = 0; i < n_wakes; i++) {
        grpc_call *c = park();
        grpc_call_cancel(c, NULL);
        grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        grpc_call_unref(c);
        done();
    }
    printf("same-thread us_per_wake=%.2f\n", (now() - t0) * 1e6 / (double)n_wakes);

    volatile int stop = 0;
    pthread_t th;
    parked = park();
    pthread_create(&th, NULL, canceller, (void *)&stop);
    long wakes = 0;
    t0 = now();
    while (wakes < n_wakes / 10) {
        grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        done();
        grpc_call *fresh = park();
        pthread_mutex_lock(&mu);
        grpc_call *old = parked;
        parked = fresh;
        pthread_mutex_unlock(&mu);
        grpc_call_unref(old);
        wakes++;
    }
    double dt = now() - t0;
    stop = 1;
    pthread_join(th, NULL);
    printf("cross-thread wakes=%ld us_per_wake=%.2f\n", wakes, dt * 1e6 / (double)wakes);
    grpc_call_cancel(parked, NULL);
    grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    grpc_call_unref(parked);
    done();

    struct pollfd p = { ls, POLLIN, 0 };
    printf("connection_attempts=%d\n", poll(&p, 1, 100));
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    grpc_channel_destroy(ch);
    grpc_shutdown();
    close(ls);
    return 0;
}
