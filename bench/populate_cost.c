/* What each step of growing by one 64 MiB chunk costs on the host backend, in this thread's CPU time
 * (less disturbed by other load than wall time), against the anonymous memory realloc would use:
 *
 *   populate-cost CHUNKS MODE
 *
 *   MODE map-populate    memfd_create + ftruncate + fallocate; mmap(MAP_SHARED|MAP_FIXED|MAP_POPULATE);
 *                        mprotect(PROT_NONE); mprotect(PROT_READ|PROT_WRITE); memcpy of 64 MiB
 *                        (the host backend before MADV_POPULATE_WRITE)
 *        populate-write  the same with mmap(MAP_SHARED|MAP_FIXED) + madvise(MADV_POPULATE_WRITE)
 *                        (the host backend now)
 *        anonymous       mmap(MAP_PRIVATE|MAP_ANONYMOUS) + the memcpy, whose first touch of each page
 *                        faults (what realloc's fresh pages cost)
 *
 * Prints the mean per chunk of each step, in milliseconds. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define CHUNK ((size_t)64 << 20)

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s CHUNKS map-populate|populate-write|anonymous\n", argv[0]);
    return 2;
  }
  const int chunks = atoi(argv[1]);
  const int populate_write = strcmp(argv[2], "populate-write") == 0;
  const int anonymous = strcmp(argv[2], "anonymous") == 0;
  if (chunks <= 0 || (!populate_write && !anonymous && strcmp(argv[2], "map-populate") != 0)) return 2;
  char* source = malloc(CHUNK);
  if (source == NULL) return 1;
  memset(source, 7, CHUNK);
  char* base = mmap(NULL, CHUNK * (size_t)chunks, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return 1;
  double create = 0, commit = 0, map = 0, close_access = 0, grant = 0, copy = 0;
  for (int i = 0; i < chunks; ++i) {
    char* va = base + (size_t)i * CHUNK;
    double t0 = cpu_now();
    if (anonymous) {
      if (mmap(va, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) return 1;
      double t1 = cpu_now();
      memcpy(va, source, CHUNK);
      map += t1 - t0;
      copy += cpu_now() - t1;
      continue;
    }
    int fd = memfd_create("populate-cost", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)CHUNK) != 0) return 1;
    double t1 = cpu_now();
    if (fallocate(fd, 0, 0, (off_t)CHUNK) != 0) return 1;
    double t2 = cpu_now();
    if (populate_write) {
      if (mmap(va, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) return 1;
      if (madvise(va, CHUNK, MADV_POPULATE_WRITE) != 0) return 1;
    } else if (mmap(va, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0) == MAP_FAILED) {
      return 1;
    }
    double t3 = cpu_now();
    if (mprotect(va, CHUNK, PROT_NONE) != 0) return 1;
    double t4 = cpu_now();
    if (mprotect(va, CHUNK, PROT_READ | PROT_WRITE) != 0) return 1;
    double t5 = cpu_now();
    memcpy(va, source, CHUNK);
    double t6 = cpu_now();
    close(fd);
    create += t1 - t0;
    commit += t2 - t1;
    map += t3 - t2;
    close_access += t4 - t3;
    grant += t5 - t4;
    copy += t6 - t5;
  }
  const double ms = 1e3 / chunks;
  printf("%-15s per 64 MiB chunk, ms of CPU: memfd %.2f  fallocate %.2f  map %.2f  mprotect(NONE) %.2f  "
         "mprotect(RW) %.2f  memcpy %.2f  total %.2f\n",
         argv[2], create * ms, commit * ms, map * ms, close_access * ms, grant * ms, copy * ms,
         (create + commit + map + close_access + grant + copy) * ms);
  return 0;
}
