/* Two writers of one raw block device with different call paths, racing on
 * the device node's write hint (one per inode, shared by every opener);
 * used by tests/tests/shim_rawdev.rs and scripts/bench-rawdev.sh.
 *
 *   shim_rawdev_race DEV threads|procs WRITES
 *
 * Writer 0 writes through path_a(), writer 1 through path_b(): WRITES
 * O_DIRECT pwrites of 4 KiB each, in its own half of the first 8 MiB, as
 * two threads of one process (one descriptor each) or two processes (each
 * opens DEV itself). After every write the writer reads F_GET_RW_HINT and
 * counts the value it saw. Prints, per writer, "writer <i> <hint>:<count>
 * ..." for hints 0..5: under the shim with path_a mapped to stream 1 and
 * path_b to stream 2, a writer that saw the other's hint right after its
 * write may have written with it (the bio takes the node's hint during the
 * call), so the count of the other's hint bounds the misplaced writes from
 * above. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef F_GET_RW_HINT
#define F_GET_RW_HINT (1024 + 11)
#endif

#define BLK 4096
#define HALF (4u << 20)

static const char *dev;
static int writes;
static pthread_barrier_t start;
static int use_barrier;

struct writer {
    int id;
    long seen[6];
};

static void note(struct writer *w, int fd) {
    uint64_t h = 0;
    if (fcntl(fd, F_GET_RW_HINT, &h) != 0 || h > 5) {
        perror("F_GET_RW_HINT");
        exit(1);
    }
    w->seen[h]++;
}

__attribute__((noinline)) static void path_a(int fd, void *buf, off_t at) {
    if (pwrite(fd, buf, BLK, at) != BLK) {
        perror("pwrite a");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void path_b(int fd, void *buf, off_t at) {
    if (pwrite(fd, buf, BLK, at) != BLK) {
        perror("pwrite b");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
}

static void *run(void *arg) {
    struct writer *w = arg;
    int fd = open(dev, O_WRONLY | O_DIRECT);
    if (fd < 0) {
        perror(dev);
        exit(1);
    }
    void *buf;
    if (posix_memalign(&buf, BLK, BLK) != 0)
        exit(1);
    memset(buf, 'a' + w->id, BLK);
    if (use_barrier)
        pthread_barrier_wait(&start);
    for (int i = 0; i < writes; i++) {
        off_t at = (off_t)w->id * HALF + (off_t)(i % (HALF / BLK)) * BLK;
        if (w->id == 0)
            path_a(fd, buf, at);
        else
            path_b(fd, buf, at);
        note(w, fd);
    }
    close(fd);
    free(buf);
    return NULL;
}

static void print(const struct writer *w) {
    printf("writer %d", w->id);
    for (int h = 0; h <= 5; h++)
        printf(" %d:%ld", h, w->seen[h]);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DEV threads|procs WRITES\n", argv[0]);
        return 2;
    }
    dev = argv[1];
    writes = atoi(argv[3]);
    struct writer w[2] = {{.id = 0}, {.id = 1}};
    if (strcmp(argv[2], "threads") == 0) {
        use_barrier = 1;
        pthread_barrier_init(&start, NULL, 2);
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, run, &w[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        print(&w[0]);
        print(&w[1]);
        return 0;
    }
    if (strcmp(argv[2], "procs") != 0) {
        fprintf(stderr, "%s: mode must be threads or procs\n", argv[0]);
        return 2;
    }
    /* Each child writes and prints its own line; a pipe starts them
     * together. */
    int go[2];
    if (pipe(go) != 0)
        return 1;
    pid_t pid[2];
    for (int i = 0; i < 2; i++) {
        pid[i] = fork();
        if (pid[i] < 0)
            return 1;
        if (pid[i] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) < 0)
                _exit(1);
            run(&w[i]);
            print(&w[i]);
            exit(0);
        }
    }
    close(go[0]);
    close(go[1]);
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        int st;
        waitpid(pid[i], &st, 0);
        ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    return ok ? 0 : 1;
}
