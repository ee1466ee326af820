/* One call site, one signature: a SIGALRM handler writes to DIR/handler
 * while the main program is anywhere in a varied workload (recursion of
 * several depths leaving different stale words on the stack, writes to
 * DIR/main from two sites, sleeping). Every handler write must get the same
 * signature wherever the signal landed. Usage: shim_sighandler DIR ROUNDS */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int hfd, mfd;
static volatile sig_atomic_t fired;

__attribute__((noinline)) static void handler_write(const char *b, size_t n) {
    if (write(hfd, b, n) != (ssize_t)n) _exit(3);
}

static void on_alarm(int sig) {
    /* A crash logger's shape: a buffer of which only the start is used;
     * the rest holds whatever the interrupted code left there. */
    char buf[512];
    (void)sig;
    fired++;
    memcpy(buf, "signal\n", 7);
    handler_write(buf, 7);
}

__attribute__((noinline)) static void site_a(int i) {
    char b[64];
    memset(b, 'a' + i % 26, sizeof b);
    if (write(mfd, b, sizeof b) != sizeof b) exit(1);
}

__attribute__((noinline)) static void site_b(int i) {
    char b[96];
    memset(b, 'A' + i % 26, sizeof b);
    if (write(mfd, b, sizeof b) != sizeof b) exit(1);
}

__attribute__((noinline)) static long spin(int depth, long x) {
    volatile long pad[40];
    for (int i = 0; i < 40; i++) pad[i] = x + i;
    if (depth > 0) return spin(depth - 1, x * 3 + pad[depth % 8]) + 1;
    for (int i = 0; i < 2000; i++) x = x * 1103515245 + 12345;
    return x;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: shim_sighandler DIR ROUNDS\n"); return 2; }
    char p[4096];
    snprintf(p, sizeof p, "%s/handler", argv[1]);
    hfd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    snprintf(p, sizeof p, "%s/main", argv[1]);
    mfd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (hfd < 0 || mfd < 0) { perror("open"); return 1; }
    int rounds = atoi(argv[2]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    long acc = 0;
    for (int i = 0; fired < rounds; i++) {
        acc += spin(i % 7, i);
        if (i % 3 == 0) site_a(i);
        else site_b(i);
        if (i % 11 == 0) usleep(50);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("ok %d\n", acc != 42);
    return 0;
}
