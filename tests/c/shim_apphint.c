/* The application's own write-lifetime hints, as RocksDB 7.8 gets them
 * wrong: F_SET_RW_HINT with a pointer to a 4-byte enum (the upper 4 bytes
 * are whatever follows it in memory), then a correct u64 call on a second
 * file. Prints what the application sees and what the inode carries.
 * Usage: shim_apphint DIR */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef F_SET_RW_HINT
#define F_SET_RW_HINT (1024 + 12)
#define F_GET_RW_HINT (1024 + 11)
#endif

struct enum_then_garbage {
    uint32_t hint; /* what the app means */
    uint32_t garbage;
};

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/sst", argv[1]);
    snprintf(b, sizeof b, "%s/wal", argv[1]);
    int fa = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fb = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    struct enum_then_garbage e = {4 /* LONG */, 0xdeadbeef};
    errno = 0;
    int r = fcntl(fa, F_SET_RW_HINT, &e);
    printf("malformed set rc=%d errno=%d\n", r, errno);
    uint64_t wal = 2; /* SHORT */
    errno = 0;
    r = fcntl(fb, F_SET_RW_HINT, &wal);
    printf("correct set rc=%d errno=%d\n", r, errno);
    write(fa, "sst", 3);
    write(fb, "wal", 3);

    uint64_t ha = 99, hb = 99;
    fcntl(fa, F_GET_RW_HINT, &ha);
    fcntl(fb, F_GET_RW_HINT, &hb);
    printf("inode hints sst=%llu wal=%llu\n", (unsigned long long)ha, (unsigned long long)hb);
    return 0;
}
