/* 8 threads write concurrently: each appends N 512-byte records to its own
 * file with write() and puts N records into its own region of a shared file
 * with pwrite(). Prints a checksum of every file (tests compare runs with
 * and without the shim, and the trace's write events against N).
 * Usage: shim_threads DIR N */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 8
static const char *dir;
static int n, shared;

static void *worker(void *arg) {
    long t = (long)arg;
    char path[4096], rec[512];
    snprintf(path, sizeof path, "%s/t%ld", dir, t);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); exit(1); }
    for (int i = 0; i < n; i++) {
        memset(rec, 'a' + (int)t, sizeof rec);
        snprintf(rec, sizeof rec, "thread %ld record %d", t, i);
        if (write(fd, rec, sizeof rec) != (ssize_t)sizeof rec) { perror("write"); exit(1); }
        off_t off = ((off_t)t * n + i) * (off_t)sizeof rec;
        if (pwrite(shared, rec, sizeof rec, off) != (ssize_t)sizeof rec) { perror("pwrite"); exit(1); }
    }
    close(fd);
    return NULL;
}

static unsigned long sum(const char *path) {
    FILE *f = fopen(path, "r");
    unsigned long h = 5381;
    int c;
    while (f && (c = fgetc(f)) != EOF) h = h * 33 + (unsigned char)c;
    if (f) fclose(f);
    return h;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    dir = argv[1];
    n = atoi(argv[2]);
    char path[4096];
    snprintf(path, sizeof path, "%s/shared", dir);
    shared = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    close(shared);
    printf("shared %lx\n", sum(path));
    for (int t = 0; t < THREADS; t++) {
        snprintf(path, sizeof path, "%s/t%d", dir, t);
        printf("t%d %lx\n", t, sum(path));
    }
    return 0;
}
