/* Prints, for each key of keys.txt, the server index libmemcached picks
   (memcached_generate_hash). argv[1] names the configuration; servers
   127.0.0.1:11211..11214 are added first (weights argv[2] if given), then
   the behaviors are set in the order the configuration lists them. */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set(memcached_st *m, memcached_behavior_t b, uint64_t v, const char *what) {
  memcached_return_t rc = memcached_behavior_set(m, b, v);
  if (rc != MEMCACHED_SUCCESS) { fprintf(stderr, "%s: %s\n", what, memcached_strerror(m, rc)); exit(1); }
  printf("# memcached_behavior_set(%s)\n", what);
}

int main(int argc, char **argv) {
  const char *cfg = argv[1];
  int weights[4] = {1, 1, 1, 1};
  if (argc > 2) sscanf(argv[2], "%d,%d,%d,%d", &weights[0], &weights[1], &weights[2], &weights[3]);
  memcached_st *m = memcached_create(NULL);
  for (int i = 0; i < 4; i++) {
    if (memcached_server_add_with_weight(m, "127.0.0.1", 11211 + i, weights[i]) != MEMCACHED_SUCCESS) { fprintf(stderr, "add\n"); return 1; }
    printf("# memcached_server_add_with_weight(\"127.0.0.1\", %d, %d)\n", 11211 + i, weights[i]);
  }
  if (!strcmp(cfg, "modula_default")) {
  } else if (!strcmp(cfg, "modula_crc")) {
    set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_CRC, "HASH, MEMCACHED_HASH_CRC");
  } else if (!strcmp(cfg, "ketama")) {
    set(m, MEMCACHED_BEHAVIOR_KETAMA, 1, "KETAMA, 1");
  } else if (!strcmp(cfg, "ketama_then_hash_md5")) {
    set(m, MEMCACHED_BEHAVIOR_KETAMA, 1, "KETAMA, 1");
    set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MD5, "HASH, MEMCACHED_HASH_MD5");
  } else if (!strcmp(cfg, "hash_md5_then_ketama")) {
    set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MD5, "HASH, MEMCACHED_HASH_MD5");
    set(m, MEMCACHED_BEHAVIOR_KETAMA, 1, "KETAMA, 1");
  } else if (!strcmp(cfg, "ketama_weighted")) {
    set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1, "KETAMA_WEIGHTED, 1");
  } else if (!strcmp(cfg, "ketama_weighted_then_hash_murmur")) {
    set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1, "KETAMA_WEIGHTED, 1");
    set(m, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_MURMUR, "HASH, MEMCACHED_HASH_MURMUR");
  } else if (!strcmp(cfg, "ketama_spy")) {
    set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY, "DISTRIBUTION, CONSISTENT_KETAMA_SPY");
  } else if (!strcmp(cfg, "ketama_weighted_then_spy")) {
    set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1, "KETAMA_WEIGHTED, 1");
    set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY, "DISTRIBUTION, CONSISTENT_KETAMA_SPY");
  } else if (!strcmp(cfg, "consistent_weighted")) {
    set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED, "DISTRIBUTION, CONSISTENT_WEIGHTED");
  } else { fprintf(stderr, "unknown %s\n", cfg); return 1; }
  FILE *f = fopen("/work/shared/golden/keys.txt", "r");
  char line[8192];
  int counts[4] = {0};
  char *out = malloc(1 << 22); size_t n = 0;
  while (fgets(line, sizeof line, f)) {
    size_t l = strlen(line);
    if (l && line[l - 1] == '\n') line[--l] = 0;
    uint32_t idx = memcached_generate_hash(m, line, l);
    counts[idx]++;
    n += sprintf(out + n, "%s\t%u\n", line, idx);
  }
  printf("# per-node counts [%d, %d, %d, %d]\n", counts[0], counts[1], counts[2], counts[3]);
  fwrite(out, 1, n, stdout);
  memcached_free(m);
  return 0;
}
