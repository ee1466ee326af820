/* One call path writing an O_DIRECT file in place, as a database's page
 * flusher does, with pages of two lifetimes behind it:
 *
 *   daemon_page_ages ROUNDS FILE [reopen]
 *
 * FILE is opened O_RDWR (and truncated, unless "reopen": a database
 * restarted on its file, whose new pages go after its last one) and
 * switched to O_DIRECT with F_SETFL (as InnoDB does). Every round one
 * loop, through one call site, writes two new
 * "table" pages after the last one (free pages) and rewrites the eight
 * pages of a hot set (pages 0-7, rewritten every ten pages written);
 * every 64 rounds the table pages are dropped (ftruncate to the hot set;
 * on a block device, BLKDISCARD of the table's range).
 * After the last round it prints "hot H table H": the F_GET_RW_HINT the
 * file carried right after that round's last hot-page write and its last
 * table-page write. Used by tests/tests/daemon_page_ages.rs. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef F_GET_RW_HINT
#define F_GET_RW_HINT (1024 + 11)
#endif

#define PAGE 4096
#define HOT 8

static uint64_t hint_of(int fd) {
    uint64_t h = 0;
    if (fcntl(fd, F_GET_RW_HINT, &h) != 0)
        return 99;
    return h;
}

__attribute__((noinline)) static void flush_page(int fd, void *buf, off_t page) {
    if (pwrite(fd, buf, PAGE, page * PAGE) != PAGE) {
        perror("pwrite");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    int reopen = argc == 4 && strcmp(argv[3], "reopen") == 0;
    if (argc != 3 && !reopen) {
        fprintf(stderr, "usage: daemon_page_ages ROUNDS FILE [reopen]\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    struct stat st;
    int blk = stat(argv[2], &st) == 0 && S_ISBLK(st.st_mode);
    int fd = open(argv[2], O_RDWR | (blk ? 0 : O_CREAT | (reopen ? 0 : O_TRUNC)), 0644);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT) != 0) {
        perror("F_SETFL O_DIRECT");
        return 1;
    }
    void *buf;
    if (posix_memalign(&buf, PAGE, PAGE) != 0)
        return 1;
    memset(buf, 'p', PAGE);
    off_t next = HOT;
    if (reopen && !blk) {
        off_t end = lseek(fd, 0, SEEK_END);
        if (end > next * PAGE)
            next = (end + PAGE - 1) / PAGE;
    }
    uint64_t hot_hint = 0, table_hint = 0;
    for (int r = 0; r < rounds; r++) {
        if (r % 64 == 63) {
            if (blk) {
                uint64_t range[2] = {(uint64_t)HOT * PAGE, (uint64_t)(next - HOT) * PAGE};
                if (ioctl(fd, BLKDISCARD, range) != 0) {
                    perror("BLKDISCARD");
                    return 1;
                }
            } else if (ftruncate(fd, (off_t)HOT * PAGE) != 0) {
                perror("ftruncate");
                return 1;
            }
            next = HOT;
        }
        off_t pages[2 + HOT] = {next, next + 1};
        next += 2;
        for (int i = 0; i < HOT; i++)
            pages[2 + i] = i;
        for (int i = 0; i < 2 + HOT; i++) {
            flush_page(fd, buf, pages[i]);
            if (r == rounds - 1) {
                if (i < 2)
                    table_hint = hint_of(fd);
                else
                    hot_hint = hint_of(fd);
            }
        }
    }
    printf("hot %llu table %llu\n", (unsigned long long)hot_hint,
           (unsigned long long)table_hint);
    return close(fd) != 0;
}
