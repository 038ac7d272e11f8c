/* The wall clock of the redis-server that tests/integration/redis_cell_real.rs
 * starts, set by the test: preloaded (LD_PRELOAD), it answers
 * clock_gettime(CLOCK_REALTIME), gettimeofday and time with the Unix
 * nanoseconds the test last wrote, as 8 little-endian bytes, into the file
 * named by BURSTSIM_FAKE_CLOCK (0: the real clock). redis-cell reads its
 * `now` with clock_gettime and Redis its key expiry with gettimeofday, so
 * both follow the test's clock; monotonic clocks (Redis's event loop,
 * jemalloc) are left alone. Nothing here allocates: jemalloc reads the
 * clock while it starts, which is why libfaketime cannot run redis-server. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile const uint64_t *fake;

static int fake_now(uint64_t *ns) {
  if (!fake) {
    const char *path = getenv("BURSTSIM_FAKE_CLOCK");
    if (!path) return 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    void *map = mmap(NULL, sizeof(uint64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return 0;
    fake = map;
  }
  *ns = *fake;
  return *ns != 0;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
  uint64_t ns;
  if ((clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) && fake_now(&ns)) {
    ts->tv_sec = (time_t)(ns / 1000000000u);
    ts->tv_nsec = (long)(ns % 1000000000u);
    return 0;
  }
  return (int)syscall(SYS_clock_gettime, clock, ts);
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  uint64_t ns;
  if (fake_now(&ns)) {
    tv->tv_sec = (time_t)(ns / 1000000000u);
    tv->tv_usec = (suseconds_t)(ns % 1000000000u / 1000u);
    return 0;
  }
  return (int)syscall(SYS_gettimeofday, tv, tz);
}

time_t time(time_t *out) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  if (out) *out = tv.tv_sec;
  return tv.tv_sec;
}
