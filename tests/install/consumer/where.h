/* Which libtensorhub.so this process runs: its real path must lie under the prefix the test
 * installed into (argv[1]), so that a build tree's library found by accident fails the test. */
#ifndef THUB_CONSUMER_WHERE_H
#define THUB_CONSUMER_WHERE_H

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorhub/tensorhub.h>

static int library_is_under(const char *prefix) {
  Dl_info dl;
  char lib[PATH_MAX], pre[PATH_MAX];
  size_t n;
  if (!dladdr((void *)&THUB_Init, &dl) || !dl.dli_fname || !realpath(dl.dli_fname, lib)) {
    fprintf(stderr, "cannot tell which libtensorhub this process runs\n");
    return 0;
  }
  if (!realpath(prefix, pre)) {
    fprintf(stderr, "no prefix %s\n", prefix);
    return 0;
  }
  n = strlen(pre);
  printf("libtensorhub: %s\n", lib);
  if (strncmp(lib, pre, n) != 0 || lib[n] != '/') {
    fprintf(stderr, "libtensorhub %s is not under the prefix %s\n", lib, pre);
    return 0;
  }
  return 1;
}

#endif
