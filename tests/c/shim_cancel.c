/* pthread_cancel of a thread blocked in write() under the shim: the forced
 * unwind must pass through the shim's frames into the application's, so the
 * application's cleanups run (here a cleanup attribute, compiled with
 * -fexceptions, as C++ destructors would). Prints what ran. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int p[2];

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

static void *thread(void *a) {
    (void)a;
    writer();
    return NULL;
}

int main(void) {
    if (pipe(p) != 0) return 1;
    pthread_t th;
    pthread_create(&th, NULL, thread, NULL);
    usleep(100000); /* let it fill the pipe and block */
    pthread_cancel(th);
    void *r;
    pthread_join(th, &r);
    printf("cancelled=%d\n", r == PTHREAD_CANCELED);
    return 0;
}
