/* pthread_cancel of a thread blocked in write() under the shim, then of one
 * blocked in splice() (a six-argument hook, whose trampoline passes its
 * record on the stack): the forced unwind must pass through the shim's
 * frames into the application's, so the application's cleanups run (here a
 * cleanup attribute, compiled with -fexceptions, as C++ destructors would).
 * Prints what ran. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int p[2];
static int q[2];
static int devnull;

static void done(int *x) {
    (void)x;
    printf("cleanup ran\n");
    fflush(stdout);
}

__attribute__((noinline)) static void writer(void) {
    int g __attribute__((cleanup(done))) = 0;
    static char buf[65536];
    memset(buf, 1, sizeof buf);
    for (;;) write(p[1], buf, sizeof buf);
    (void)g;
}

/* Blocks in splice() reading the empty pipe q. */
__attribute__((noinline)) static void splicer(void) {
    int g __attribute__((cleanup(done))) = 0;
    for (;;) splice(q[0], NULL, devnull, NULL, 4096, 0);
    (void)g;
}

static void *thread(void *a) {
    ((void (*)(void))a)();
    return NULL;
}

static void cancel(const char *what, void (*body)(void)) {
    pthread_t th;
    pthread_create(&th, NULL, thread, (void *)body);
    usleep(100000); /* let it block */
    pthread_cancel(th);
    void *r;
    pthread_join(th, &r);
    printf("%s cancelled=%d\n", what, r == PTHREAD_CANCELED);
}

int main(void) {
    if (pipe(p) != 0 || pipe(q) != 0) return 1;
    devnull = open("/dev/null", O_WRONLY);
    if (devnull < 0) return 1;
    cancel("write", writer);
    cancel("splice", splicer);
    return 0;
}
