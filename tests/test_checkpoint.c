/* test_checkpoint.c - saving and loading a buffer: round trips that sample
   the same future batches, every single-byte corruption and every
   truncation refused with the buffer unchanged, foreign files, failed
   saves, concurrent savers, directories, lying headers, generation wrap,
   sharded loads, merging appends and allocation failure. Files go to the current directory
   (the build directory under meson), named per PER_REAL. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buffer_util.h"
#include "ckpt_v1.h"
#include "ckpt_v2.h"

#define NAME(s) (IS_FLOAT ? "ckpt_float_" s : "ckpt_double_" s)
/* Header bytes of a version 3 file; a filled slot adds item_size + 4
   (generation) + sizeof(per_real) (leaf) + 1 (episode end) + 4
   (trajectory id) bytes. */
#define HDR 220

/* The library's fsync calls land here: this definition takes the place of
   the C library's in this program. It counts directory syncs, notes
   whether the checkpoint `t_sync.path` was already in place (and no
   temporary file of it left) when its directory was synced, and fails on
   request, so that the tests see the order of the syncs and can inject
   I/O errors. Nothing is really synced: the tests do not need
   durability. */
static struct {
  int dirs;                /* fsync calls on directories */
  int fail_file, fail_dir; /* 1: fail those with EIO */
  const char *path;        /* checkpoint to look for at a directory sync */
  int path_in_place;       /* path existed, alone, at the last one */
} t_sync;

static int count_tmp(const char *path);

int fsync(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    errno = EBADF;
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    ++t_sync.dirs;
    if (t_sync.path)
      t_sync.path_in_place =
          stat(t_sync.path, &st) == 0 && count_tmp(t_sync.path) == 0;
    if (t_sync.fail_dir) {
      errno = EIO;
      return -1;
    }
    return 0;
  }
  if (t_sync.fail_file) {
    errno = EIO;
    return -1;
  }
  return 0;
}

/* Temporary files of a save to `path` in the current directory:
   path.tmp-* (per_buffer_save's names). */
static int count_tmp(const char *path) {
  DIR *d = opendir(".");
  struct dirent *e;
  size_t len = strlen(path);
  int n = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL)
    n += strncmp(e->d_name, path, len) == 0 &&
         strncmp(e->d_name + len, ".tmp-", 5) == 0;
  closedir(d);
  return n;
}

/* Recompute the CRC of a file image after a deliberate edit. */
static void fix_crc(unsigned char *buf, long n) {
  uint32_t c = per_crc32c(0, buf, (size_t)n - 4);
  buf[n - 4] = (unsigned char)c;
  buf[n - 3] = (unsigned char)(c >> 8);
  buf[n - 2] = (unsigned char)(c >> 16);
  buf[n - 1] = (unsigned char)(c >> 24);
}

static void put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

/* A buffer with some history: wrapped ring, updates, samples. */
static void fill(per_buffer *b, uint32_t adds, uint64_t seed) {
  per_rng r;
  uint32_t i, k;
  unsigned char item[64];
  per_rng_init(&r, seed);
  for (i = 0; i < adds; ++i) {
    for (k = 0; k < b->cfg.item_size && k < sizeof item; ++k)
      item[k] = (unsigned char)(i * 31 + k);
    CHECK_OK(per_buffer_add(b, item));
    if (i % 7 == 6) {
      uint64_t ids[4];
      float td[4];
      CHECK_OK(per_buffer_sample(b, 4, NULL, NULL, ids, NULL));
      for (k = 0; k < 4; ++k) td[k] = per_rng_float(&r) * 3;
      CHECK_OK(per_buffer_update(b, ids, td, 4, NULL));
    }
  }
  (void)per_rng_u32(&b->rng); /* leave buffered words in the stream */
}

static void test_crc(void) {
  CHECK_EQ_U(per_crc32c(0, "123456789", 9), 0xE3069283u);
  CHECK_EQ_U(per_crc32c(per_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
  CHECK_EQ_U(per_crc32c(0, "", 0), 0);
}

/* Save, load into a buffer with another seed: the state is identical and
   both draw the same batches from then on. */
static void test_round_trip(void) {
  int variant;
  for (variant = 0; variant < 4; ++variant) {
    per_config c = cfg_of(37, 12);
    per_buffer a, b;
    c.seed = 5;
    c.alpha = variant == 1 ? 0 : 0.7;
    c.flags = variant == 2 ? PER_WEIGHTS_BUFFER_MAX : 0;
    if (variant == 3) c.eps = 0;
    c.beta_steps = 1000;
    CHECK_OK(per_buffer_init(&a, &c, NULL));
    fill(&a, variant == 3 ? 20 : 100, 1);
    if (variant == 3) { /* zero leaves in the file */
      uint64_t ids[3];
      float td[3] = {0, 0, 0};
      CHECK_OK(per_buffer_sample(&a, 3, NULL, NULL, ids, NULL));
      CHECK_OK(per_buffer_update(&a, ids, td, 3, NULL));
    }
    if (variant == 1) /* a shuffled swap permutation */
      CHECK_OK(sample_unique(&a, 8));
    CHECK_OK(per_buffer_save(&a, NAME("rt.bin")));
    c.seed = 999;
    c.alpha = variant == 1 ? 0 : 0.3; /* taken from the file */
    c.eps = 0.5;
    CHECK_OK(per_buffer_init(&b, &c, NULL));
    fill(&b, 5, 2);
    CHECK_OK(per_buffer_load(&b, NAME("rt.bin")));
    CHECK_MSG(state_equal(&a, &b), "variant %d: loaded state differs", variant);
    CHECK_OK(per_buffer_check(&b));
    same_draws(&a, &b, 30, 9);
    CHECK(state_equal(&a, &b));
    per_buffer_free(&a);
    per_buffer_free(&b);
    remove(NAME("rt.bin"));
  }
}

/* Every single-byte change and every truncation of a small checkpoint is
   refused and leaves the buffer exactly as it was. */
static void test_corruption(void) {
  static unsigned char img[4096], bad[4096];
  per_config c = cfg_of(5, 4);
  per_buffer a, b;
  long n, i;
  int flip;
  uint32_t fails = 0;
  c.flags = PER_WEIGHTS_BUFFER_MAX;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  fill(&a, 8, 3);
  CHECK_OK(per_buffer_save(&a, NAME("small.bin")));
  n = file_read(NAME("small.bin"), img, sizeof img);
  CHECK(n == HDR + 5 * (4 + 4 + (long)sizeof(per_real) + 1 + 4) + 4);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  fill(&b, 3, 4);
  for (flip = 0; flip < 2; ++flip) {
    for (i = 0; i < n; ++i) {
      bsnap s;
      per_status st;
      memcpy(bad, img, (size_t)n);
      bad[i] ^= flip ? 0x01 : 0xff;
      CHECK(file_write(NAME("bad.bin"), bad, n));
      s = bsnap_take(&b);
      st = per_buffer_load(&b, NAME("bad.bin"));
      CHECK_MSG(st != PER_OK, "byte %ld ^ %s accepted", i,
                flip ? "0x01" : "0xff");
      fails += st != PER_OK;
      CHECK_UNCHANGED(s, &b);
    }
  }
  CHECK_EQ_U(fails, 2 * n);
  for (i = 0; i < n; ++i) {
    bsnap s;
    CHECK(file_write(NAME("bad.bin"), img, i));
    s = bsnap_take(&b);
    CHECK_MSG(per_buffer_load(&b, NAME("bad.bin")) != PER_OK,
              "truncation to %ld accepted", i);
    CHECK_UNCHANGED(s, &b);
  }
  /* the specific codes of some of them */
  CHECK(file_write(NAME("bad.bin"), img, n - 1));
  CHECK_STATUS(per_buffer_load(&b, NAME("bad.bin")), PER_ERR_TRUNCATED);
  memcpy(bad, img, (size_t)n);
  bad[n - 1] ^= 1;
  CHECK(file_write(NAME("bad.bin"), bad, n));
  CHECK_STATUS(per_buffer_load(&b, NAME("bad.bin")), PER_ERR_CHECKSUM);
  bad[0] ^= 1;
  CHECK(file_write(NAME("bad.bin"), bad, n));
  CHECK_STATUS(per_buffer_load(&b, NAME("bad.bin")), PER_ERR_FORMAT);
  memcpy(bad, img, (size_t)n);
  bad[n] = 0; /* one byte too many */
  CHECK(file_write(NAME("bad.bin"), bad, n + 1));
  CHECK(per_buffer_load(&b, NAME("bad.bin")) != PER_OK);
  /* the original still loads */
  CHECK_OK(per_buffer_load(&b, NAME("small.bin")));
  CHECK(state_equal(&a, &b));
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("bad.bin"));
  remove(NAME("small.bin"));
}

/* per_buffer_load_mem: a file's bytes and a snapshot with its CRC load as
   the file does; every single-byte change, every truncation and a byte
   too many are refused with the buffer unchanged, as from a file. */
static void test_load_mem(void) {
  static unsigned char img[4096], bad[4096];
  per_config c = cfg_of(5, 4);
  per_buffer a, b;
  long n, i;
  size_t len = 0;
  unsigned char *snap;
  c.flags = PER_WEIGHTS_BUFFER_MAX;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  fill(&a, 8, 3);
  CHECK_OK(per_buffer_save(&a, NAME("mem.bin")));
  n = file_read(NAME("mem.bin"), img, sizeof img);
  REQUIRE(n > 0);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  fill(&b, 3, 4);
  CHECK_OK(per_buffer_load_mem(&b, img, (size_t)n));
  CHECK(state_equal(&a, &b));
  CHECK_STR(b.error, "");
  /* a snapshot, its CRC filled in as per_snapshot_write does */
  snap = (unsigned char *)malloc(per_buffer_snapshot_bytes(&a));
  REQUIRE(snap != NULL);
  CHECK_OK(per_buffer_snapshot(&a, snap, per_buffer_snapshot_bytes(&a), &len));
  CHECK_EQ_U(len, n);
  peri_put32(snap + len - 4, per_crc32c(0, snap, len - 4));
  CHECK_MEM(snap, img, len);
  fill(&b, 2, 5);
  CHECK_OK(per_buffer_load_mem(&b, snap, len));
  CHECK(state_equal(&a, &b));
  free(snap);
  fill(&b, 2, 6);
  for (i = 0; i < n; ++i) {
    bsnap s;
    memcpy(bad, img, (size_t)n);
    bad[i] ^= 0x10;
    s = bsnap_take(&b);
    CHECK_MSG(per_buffer_load_mem(&b, bad, (size_t)n) != PER_OK,
              "byte %ld changed accepted", i);
    CHECK_UNCHANGED(s, &b);
    s = bsnap_take(&b);
    CHECK_MSG(per_buffer_load_mem(&b, img, (size_t)i) != PER_OK,
              "truncation to %ld accepted", i);
    CHECK_UNCHANGED(s, &b);
  }
  CHECK_STATUS(per_buffer_load_mem(&b, img, (size_t)n - 1), PER_ERR_TRUNCATED);
  memcpy(bad, img, (size_t)n);
  bad[n] = 0;
  CHECK_STATUS(per_buffer_load_mem(&b, bad, (size_t)n + 1), PER_ERR_CORRUPT);
  CHECK_STATUS(per_buffer_load_mem(&b, NULL, 4), PER_ERR_NULL);
  CHECK_STR(b.error, "mem is NULL");
  CHECK_STATUS(per_buffer_load_mem(NULL, img, (size_t)n), PER_ERR_NULL);
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("mem.bin"));
}

/* Files from elsewhere: other version, item size, capacity, PER_REAL,
   flags; fields out of range under a valid checksum. */
static void test_foreign(void) {
  static unsigned char img[8192], bad[8192];
  per_config c = cfg_of(9, 8);
  per_buffer a, b;
  long n;
  bsnap s;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  fill(&a, 12, 5);
  CHECK_OK(per_buffer_save(&a, NAME("f.bin")));
  n = file_read(NAME("f.bin"), img, sizeof img);
  CHECK(n > HDR);

  /* a buffer with another item size, capacity or flags refuses it, and
     says which field differs */
  {
    per_config d[6];
    static const char *says[6] = {
        "the checkpoint's item_size 8, the buffer's 4",
        "the checkpoint's capacity 9, the buffer's 10",
        "the checkpoint's flags 0, the buffer's 1",
        "the checkpoint's max_unique 9, the buffer's 3",
        "the checkpoint's alpha is not 0, the buffer's is",
        "the checkpoint's seq_len 0, the buffer's 3"};
    int k;
    d[0] = cfg_of(9, 4);
    d[1] = cfg_of(10, 8);
    d[2] = cfg_of(9, 8);
    d[2].flags = PER_WEIGHTS_BUFFER_MAX;
    d[3] = cfg_of(9, 8);
    d[3].max_unique = 3;
    d[4] = cfg_of(9, 8);
    d[4].alpha = 0;
    d[5] = cfg_of(9, 8);
    d[5].seq_len = 3;
    d[5].seq_stride = 3;
    for (k = 0; k < 6; ++k) {
      CHECK_OK(per_buffer_init(&b, &d[k], NULL));
      s = bsnap_take(&b);
      CHECK_STATUS(per_buffer_load(&b, NAME("f.bin")), PER_ERR_MISMATCH);
      CHECK_UNCHANGED(s, &b);
      CHECK_STR(b.error, says[k]);
      CHECK_STATUS(per_buffer_load(&b, NAME("nothing-here.bin")), PER_ERR_IO);
      CHECK_STR(b.error, "the file cannot be opened for reading");
      CHECK_OK(per_buffer_add(&b, img)); /* a successful call clears it */
      CHECK(b.error[0] == 0);
      per_buffer_free(&b);
    }
  }
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  /* patched fields with a recomputed checksum */
  {
    struct {
      long off;
      uint32_t v;
      per_status want;
    } t[12];
    int k, m = 0;
    t[m].off = 8;
    t[m].v = 4;
    t[m++].want = PER_ERR_VERSION; /* version */
    t[m].off = 12;
    t[m].v = 0x04030201u;
    t[m++].want = PER_ERR_FORMAT; /* byte order */
    t[m].off = 20;
    t[m].v = IS_FLOAT ? 8 : 4;
    t[m++].want = PER_ERR_CORRUPT; /* PER_REAL: lengths disagree */
    t[m].off = 28;
    t[m].v = 4;
    t[m++].want = PER_ERR_CORRUPT; /* item size: lengths disagree */
    t[m].off = 36;
    t[m].v = 9;
    t[m++].want = PER_ERR_CORRUPT; /* pos == capacity */
    t[m].off = 40;
    t[m].v = 8;
    t[m++].want = PER_ERR_CORRUPT; /* unknown flag */
    t[m].off = 48;
    t[m].v = 2;
    t[m++].want = PER_ERR_CORRUPT; /* zero hint */
    t[m].off = 160;
    t[m].v = 5;
    t[m++].want = PER_ERR_CORRUPT; /* rng avail */
    t[m].off = 164;
    t[m].v = 1;
    t[m++].want = PER_ERR_CORRUPT; /* reserved */
    t[m].off = HDR + 9 * 8;
    t[m].v = 0;
    t[m++].want = PER_ERR_CORRUPT; /* generation 0 */
    t[m].off = 208;
    t[m].v = 13;
    t[m++].want = PER_ERR_CORRUPT; /* trajectories > added */
    /* the oldest item (slot 3) in the newest trajectory */
    t[m].off = HDR + 9 * (8 + 4 + (long)sizeof(per_real) + 1) + 3 * 4;
    t[m].v = 11;
    t[m++].want = PER_ERR_CORRUPT;
    for (k = 0; k < m; ++k) {
      memcpy(bad, img, (size_t)n);
      put32(bad + t[k].off, t[k].v);
      fix_crc(bad, n);
      CHECK(file_write(NAME("bad.bin"), bad, n));
      s = bsnap_take(&b);
      CHECK_MSG(per_buffer_load(&b, NAME("bad.bin")) == t[k].want,
                "patch %d at %ld", k, t[k].off);
      CHECK_UNCHANGED(s, &b);
    }
  }
  /* a negative leaf, a leaf above max_leaf, a wrong stored total */
  {
    long leaves = HDR + 9 * 8 + 9 * 4;
    per_real v[3];
    int k;
    v[0] = -1;
    v[1] = a.max_leaf * 2;
    v[2] = 0; /* zero leaf without the zero hint */
    for (k = 0; k < 4; ++k) {
      memcpy(bad, img, (size_t)n);
      if (k < 3) {
        memcpy(bad + leaves + 3 * (long)sizeof(per_real), &v[k],
               sizeof(per_real));
      } else {
        double tot = 12345.0;
        memcpy(bad + 176, &tot, 8);
      }
      fix_crc(bad, n);
      CHECK(file_write(NAME("bad.bin"), bad, n));
      s = bsnap_take(&b);
      CHECK_STATUS(per_buffer_load(&b, NAME("bad.bin")), PER_ERR_CORRUPT);
      CHECK_UNCHANGED(s, &b);
    }
  }
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_load(&b, NAME("does_not_exist.bin")), PER_ERR_IO);
  CHECK_STATUS(per_buffer_load(&b, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_load_shard(&b, NAME("f.bin"), 2, 2), PER_ERR_ARG);
  CHECK_STATUS(per_buffer_load_shard(&b, NAME("f.bin"), 0, 0), PER_ERR_ARG);
  CHECK(file_write(NAME("bad.bin"),
                   (const unsigned char *)"hello world, not a checkpoint", 29));
  CHECK_STATUS(per_buffer_load(&b, NAME("bad.bin")), PER_ERR_FORMAT);
  CHECK_UNCHANGED(s, &b);
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("bad.bin"));
  remove(NAME("f.bin"));
}

/* The swap permutation of a uniform (alpha = 0) buffer: duplicates and
   values out of range are refused; a shard into a small buffer works. */
static void test_permutation(void) {
  static unsigned char img[4096], bad[4096];
  per_config c = cfg_of(9, 4);
  per_buffer a, b;
  per_sample_opts o;
  uint64_t ids[9];
  long n, perm = HDR + 9 * 4 + 9 * 4 + 9 * (long)sizeof(per_real);
  bsnap s;
  int k;
  c.alpha = 0;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  fill(&a, 12, 9);
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_UNIQUE;
  CHECK_OK(per_buffer_sample(&a, 9, &o, NULL, ids, NULL));
  CHECK_OK(per_buffer_save(&a, NAME("perm.bin")));
  n = file_read(NAME("perm.bin"), img, sizeof img);
  CHECK(n == perm + 9 * 4 + 9 + 9 * 4 + 4);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (k = 0; k < 3; ++k) {
    memcpy(bad, img, (size_t)n);
    if (k == 0) memcpy(bad + perm + 4, bad + perm, 4); /* a duplicate */
    if (k == 1) put32(bad + perm + 8, 9);              /* out of range */
    if (k == 2) put32(bad + perm + 8, 0x80000001u);    /* bit 31 set */
    fix_crc(bad, n);
    CHECK(file_write(NAME("bad.bin"), bad, n));
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_load(&b, NAME("bad.bin")), PER_ERR_CORRUPT);
    CHECK_UNCHANGED(s, &b);
  }
  CHECK_OK(per_buffer_load(&b, NAME("perm.bin")));
  CHECK(state_equal(&a, &b));
  per_buffer_free(&b);
  c.capacity = 1;
  c.max_unique = 1;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_load_shard(&b, NAME("perm.bin"), 4, 9));
  CHECK_EQ_U(b.size, 1);
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("perm.bin"));
  remove(NAME("bad.bin"));
}

/* A failed save leaves the previous file as it was and no temporary file;
   a good one syncs the file, renames it, then syncs the directory. */
static void test_failed_save(void) {
  static unsigned char before[4096], after[4096];
  per_config c = cfg_of(4, 4);
  per_buffer a, b;
  long n1, n2;
  int dirs;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  fill(&a, 6, 6);
  CHECK_OK(per_buffer_save(&a, NAME("keep.bin")));
  n1 = file_read(NAME("keep.bin"), before, sizeof before);
  fill(&a, 2, 7);
  /* the file's fsync fails: nothing renamed, the temporary file removed */
  t_sync.fail_file = 1;
  CHECK_STATUS(per_buffer_save(&a, NAME("keep.bin")), PER_ERR_IO);
  t_sync.fail_file = 0;
  n2 = file_read(NAME("keep.bin"), after, sizeof after);
  CHECK(n1 > 0 && n1 == n2);
  CHECK_MEM(before, after, (size_t)n1);
  CHECK_EQ_U(count_tmp(NAME("keep.bin")), 0);
  /* path is a directory: the rename fails, the temporary file is removed */
  CHECK(mkdir(NAME("dir.bin"), 0700) == 0 || errno == EEXIST);
  CHECK_STATUS(per_buffer_save(&a, NAME("dir.bin")), PER_ERR_IO);
  CHECK_EQ_U(count_tmp(NAME("dir.bin")), 0);
  CHECK(rmdir(NAME("dir.bin")) == 0);
  /* a directory that does not exist */
  CHECK_STATUS(per_buffer_save(&a, "no_such_dir_per/x.bin"), PER_ERR_IO);
  CHECK_STATUS(per_buffer_save(&a, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_save(NULL, NAME("keep.bin")), PER_ERR_NULL);
  /* a good save replaces it, leaving no temporary file behind, and syncs
     the directory once the new file is in place */
  dirs = t_sync.dirs;
  t_sync.path = NAME("keep.bin");
  t_sync.path_in_place = 0;
  CHECK_OK(per_buffer_save(&a, NAME("keep.bin")));
  CHECK_EQ_U(t_sync.dirs - dirs, 1);
  CHECK(t_sync.path_in_place);
  n2 = file_read(NAME("keep.bin"), after, sizeof after);
  CHECK(n2 == n1 && memcmp(before, after, (size_t)n1) != 0);
  CHECK_EQ_U(count_tmp(NAME("keep.bin")), 0);
  /* the directory's fsync fails: PER_ERR_IO, but the new file is in place
     and complete (the documented exception) */
  fill(&a, 3, 8);
  t_sync.fail_dir = 1;
  CHECK_STATUS(per_buffer_save(&a, NAME("keep.bin")), PER_ERR_IO);
  t_sync.fail_dir = 0;
  t_sync.path = NULL;
  CHECK_OK(per_buffer_load(&b, NAME("keep.bin")));
  CHECK(state_equal(&a, &b));
  CHECK_EQ_U(count_tmp(NAME("keep.bin")), 0);
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("keep.bin"));
}

/* Several processes saving to one path at once, while this one loads it
   over and over: every save succeeds, every load finds a complete file
   (one of the savers'), and no temporary file is left. With one shared
   temporary name the savers truncate and interleave each other's writes
   and rename each other's half files into place. */
static void test_concurrent_saves(void) {
  enum { SAVERS = 3, SAVES = 40, LOADS = 60 };
  per_config c = cfg_of(4096, 64);
  per_buffer b;
  pid_t pid[SAVERS];
  int k, bad = 0, status;
  {
    per_buffer a;
    CHECK_OK(per_buffer_init(&a, &c, NULL));
    fill(&a, 100, 1);
    CHECK_OK(per_buffer_save(&a, NAME("conc.bin")));
    per_buffer_free(&a);
  }
  for (k = 0; k < SAVERS; ++k) {
    pid[k] = fork();
    CHECK(pid[k] >= 0);
    if (pid[k] == 0) {
      per_buffer a;
      int j, fails = 0;
      c.seed = (uint64_t)k + 10;
      if (per_buffer_init(&a, &c, NULL) != PER_OK) _exit(2);
      fill(&a, 5000 + 100 * (uint32_t)k, (uint64_t)k + 20);
      for (j = 0; j < SAVES; ++j)
        fails += per_buffer_save(&a, NAME("conc.bin")) != PER_OK;
      per_buffer_free(&a);
      _exit(fails ? 1 : 0);
    }
  }
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (k = 0; k < LOADS; ++k) {
    per_status st = per_buffer_load(&b, NAME("conc.bin"));
    CHECK_MSG(st == PER_OK, "load %d during the saves: %s", k,
              per_status_str(st));
    bad += st != PER_OK;
    if (bad > 3) break;
  }
  for (k = 0; k < SAVERS; ++k) {
    CHECK(waitpid(pid[k], &status, 0) == pid[k]);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "saver %d failed",
              k);
  }
  CHECK_OK(per_buffer_load(&b, NAME("conc.bin")));
  CHECK_OK(per_buffer_check(&b));
  CHECK(b.size == 4096 && b.added >= 5000);
  CHECK_EQ_U(count_tmp(NAME("conc.bin")), 0);
  per_buffer_free(&b);
  remove(NAME("conc.bin"));
}

/* Loading a directory is a read error (PER_ERR_IO), not a foreign file. */
static void test_load_directory(void) {
  per_config c = cfg_of(9, 8);
  per_buffer b;
  bsnap s;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  fill(&b, 5, 2);
  CHECK(mkdir(NAME("isdir.bin"), 0700) == 0 || errno == EEXIST);
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_load(&b, NAME("isdir.bin")), PER_ERR_IO);
  CHECK_STATUS(per_buffer_load_shard(&b, NAME("isdir.bin"), 0, 2), PER_ERR_IO);
  CHECK_UNCHANGED(s, &b);
  CHECK(rmdir(NAME("isdir.bin")) == 0);
  per_buffer_free(&b);
}

/* A header that claims far more than the file holds is refused before
   anything is allocated; so is one whose capacity does not fit the
   buffer. */
static void test_lying_header(void) {
  static unsigned char img[4096];
  per_config c = cfg_of(1000, 8);
  per_buffer a, b;
  t_heap heap;
  long n;
  int k;
  memset(&heap, 0, sizeof heap);
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  fill(&a, 12, 5);
  CHECK_OK(per_buffer_save(&a, NAME("lie.bin")));
  n = file_read(NAME("lie.bin"), img, sizeof img);
  CHECK(n == HDR + 12 * (8 + 4 + (long)sizeof(per_real) + 1 + 4) + 4);
  CHECK_OK(per_buffer_init(&b, &c, &heap));
  for (k = 0; k < 3; ++k) {
    /* k = 0: capacity 2^31 holding 2^30 items (over 17 GB claimed) in a
       256-byte file; k = 1: the buffer's capacity holding 900 items (18
       KB claimed) in the real file; k = 2: the real items in a capacity
       of 2^31 (a file of another buffer) */
    uint32_t cap = k == 1 ? 1000u : 0x80000000u;
    uint32_t size = k == 0 ? 0x40000000u : k == 1 ? 900u : 12u;
    uint64_t bytes =
        HDR + (uint64_t)size * (8u + 4u + sizeof(per_real) + 1u + 4u) + 4u;
    per_status want = k < 2 ? PER_ERR_TRUNCATED : PER_ERR_MISMATCH;
    bsnap s;
    put32(img + 24, cap);
    put32(img + 32, size);
    put32(img + 184, (uint32_t)bytes);
    put32(img + 188, (uint32_t)(bytes >> 32));
    fix_crc(img, n);
    CHECK(file_write(NAME("lie.bin"), img, k == 0 ? 256 : n));
    s = bsnap_take(&b);
    heap.max_bytes = 0;
    heap.calls = 0;
    CHECK_STATUS(per_buffer_load(&b, NAME("lie.bin")), want);
    CHECK_MSG(heap.calls == 0,
              "case %d: %ld allocations, the largest %lu bytes", k, heap.calls,
              (unsigned long)heap.max_bytes);
    CHECK_UNCHANGED(s, &b);
  }
  per_buffer_free(&a);
  per_buffer_free(&b);
  CHECK_EQ_U(heap.live, 0);
  remove(NAME("lie.bin"));
}

/* Generations wrap after 2^32 - 1 writes of a slot: an id from before the
   wrap is stale (not an error that rejects the batch), and an id whose
   generation is above its slot's is an error only while no slot can have
   wrapped. The wrap is reached through a checkpoint with a slot at
   generation 2^32 - 1 and 2^32 - 1 adds. */
static void test_generation_wrap(void) {
  static unsigned char img[4096];
  per_config c = cfg_of(1, 4);
  per_buffer a, b;
  unsigned char item[4] = {1, 2, 3, 4};
  uint64_t id, forged;
  uint32_t stale = 99;
  float td = 0.5f;
  long n;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  CHECK_OK(per_buffer_add(&a, item));
  /* before any wrap, a generation above the slot's is refused */
  forged = (uint64_t)2 << 32;
  CHECK_STATUS(per_buffer_update(&a, &forged, &td, 1, &stale), PER_ERR_INDEX);
  CHECK_OK(per_buffer_save(&a, NAME("gen.bin")));
  n = file_read(NAME("gen.bin"), img, sizeof img);
  CHECK(n == HDR + 4 + 4 + (long)sizeof(per_real) + 1 + 4 + 4);
  put32(img + HDR + 4, 0xffffffffu); /* slot 0's generation */
  put32(img + 120, 0xffffffffu);     /* added, low word */
  fix_crc(img, n);
  CHECK(file_write(NAME("gen.bin"), img, n));
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_load(&b, NAME("gen.bin")));
  CHECK_OK(per_buffer_check(&b));
  CHECK_OK(per_buffer_sample(&b, 1, NULL, NULL, &id, NULL));
  CHECK_EQ_U((uint32_t)(id >> 32), 0xffffffffu);
  CHECK_OK(per_buffer_add(&b, item)); /* the slot's 2^32-th write */
  CHECK_EQ_U(b.gen[0], 1);
  CHECK_OK(per_buffer_update(&b, &id, &td, 1, &stale));
  CHECK_EQ_U(stale, 1);
  CHECK_EQ_F(b.tree.node[b.tree.leaves], b.max_leaf); /* not applied */
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("gen.bin"));
}

/* Ranks 0..w-1 together hold every item exactly once, with its leaf,
   oldest first. */
static void test_shards(void) {
  per_config c = cfg_of(23, 4);
  per_buffer a;
  uint32_t w, v;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  for (v = 0; v < 40; ++v)
    CHECK_OK(per_buffer_add(&a, &v)); /* wrapped: items 17..39 */
  {
    uint64_t ids[10];
    float td[10];
    uint32_t i;
    CHECK_OK(per_buffer_sample(&a, 10, NULL, NULL, ids, NULL));
    for (i = 0; i < 10; ++i) td[i] = (float)i;
    CHECK_OK(per_buffer_update(&a, ids, td, 10, NULL));
  }
  CHECK_OK(per_buffer_save(&a, NAME("shard.bin")));
  for (w = 1; w <= 3; ++w) {
    uint32_t seen[40] = {0}, r, i, total = 0;
    for (r = 0; r < w; ++r) {
      per_config d = cfg_of(12, 4);
      per_buffer b;
      uint32_t prev = 0;
      d.alpha = 0.9; /* b keeps its own config; leaves come from the file */
      CHECK_OK(per_buffer_init(&b, &d, NULL));
      if (w == 1) {
        bsnap s = bsnap_take(&b);
        CHECK_STATUS(per_buffer_load_shard(&b, NAME("shard.bin"), 0, 1),
                     PER_ERR_MISMATCH);
        CHECK_UNCHANGED(s, &b);
        per_buffer_free(&b);
        d.capacity = 23;
        d.max_unique = 23;
        CHECK_OK(per_buffer_init(&b, &d, NULL));
      }
      CHECK_OK(per_buffer_load_shard(&b, NAME("shard.bin"), r, w));
      CHECK_OK(per_buffer_check(&b));
      for (i = 0; i < b.size; ++i) {
        uint32_t item, slot;
        memcpy(&item, b.items + 4 * i, 4);
        CHECK(item >= 17 && item < 40);
        slot = item % 23;
        CHECK_EQ_U(slot % w, r);
        CHECK(i == 0 || item > prev); /* oldest first */
        prev = item;
        CHECK_EQ_F(per_tree_get(&b.tree, i), per_tree_get(&a.tree, slot));
        CHECK_EQ_U(b.gen[i], 1);
        if (item < 40) seen[item] += 1;
      }
      total += b.size;
      {
        uint64_t ids[4];
        CHECK_OK(per_buffer_sample(&b, 4, NULL, NULL, ids, NULL));
      }
      per_buffer_free(&b);
    }
    CHECK_EQ_U(total, 23);
    for (i = 17; i < 40; ++i)
      CHECK_MSG(seen[i] == 1, "w %u: item %u loaded %u times", w, i, seen[i]);
  }
  per_buffer_free(&a);
  remove(NAME("shard.bin"));
}

/* Two saved buffers merged and split by appends: ranks 0..w-1 take
   balanced blocks of the files' items in order (a's oldest first, then
   c's), each with its leaf and episode end; trajectories stay grouped;
   the counters count what was appended. Bad ranges, a full buffer,
   another item size and a damaged file change nothing. */
static void test_append(void) {
  per_config ca = cfg_of(23, 4), cc = cfg_of(16, 4);
  per_buffer a, c, b;
  unsigned char ends[5] = {0, 0, PER_END_TERMINATED, 0, PER_END_TRUNCATED};
  uint32_t v, w, i, item[5];
  const char *fa = NAME("app_a.bin"), *fc = NAME("app_c.bin");
  per_real init_max;
  bsnap s;
  CHECK_OK(per_buffer_init(&a, &ca, NULL));
  CHECK_OK(per_buffer_init(&c, &cc, NULL));
  for (v = 0; v < 40; v += 5) { /* wrapped: items 17..39, in batches */
    for (i = 0; i < 5; ++i) item[i] = v + i;
    CHECK_OK(per_buffer_add_steps(&a, item, 5, ends));
  }
  for (v = 100; v < 109; ++v) CHECK_OK(per_buffer_add(&c, &v));
  {
    uint64_t ids[10];
    float td[10];
    CHECK_OK(per_buffer_sample(&a, 10, NULL, NULL, ids, NULL));
    for (i = 0; i < 10; ++i) td[i] = (float)i * 0.7f;
    CHECK_OK(per_buffer_update(&a, ids, td, 10, NULL));
    CHECK_OK(per_buffer_sample(&c, 5, NULL, NULL, ids, NULL));
    for (i = 0; i < 5; ++i) td[i] = (float)i * 9.0f; /* c's max above a's */
    CHECK_OK(per_buffer_update(&c, ids, td, 5, NULL));
  }
  CHECK(c.max_leaf > a.max_leaf);
  CHECK_OK(per_buffer_save(&a, fa));
  CHECK_OK(per_buffer_save(&c, fc));
  for (w = 1; w <= 4; ++w) {
    uint32_t seen[110] = {0}, r, total = 0, S = 23 + 9;
    for (r = 0; r < w; ++r) {
      per_config d = cfg_of(32, 4);
      uint32_t lo = r * S / w, hi = (r + 1) * S / w, n = hi - lo, prev = 0;
      d.alpha = 0.9; /* b keeps its own config; leaves come from the files */
      CHECK_OK(per_buffer_init(&b, &d, NULL));
      init_max = b.max_leaf;
      if (lo < 23) /* a's part, then c's */
        CHECK_OK(per_buffer_load_append(&b, fa, lo, (hi < 23 ? hi : 23) - lo));
      if (hi > 23)
        CHECK_OK(per_buffer_load_append(&b, fc, lo > 23 ? lo - 23 : 0,
                                        hi - (lo > 23 ? lo : 23)));
      CHECK_OK(per_buffer_check(&b));
      CHECK_EQ_U(b.size, n);
      CHECK_EQ_U(b.pos, n % 32);
      CHECK_EQ_U(b.added, n);
      CHECK_EQ_F(b.max_leaf, hi > 23                 ? c.max_leaf
                             : init_max > a.max_leaf ? init_max
                                                     : a.max_leaf);
      for (i = 0; i < n; ++i) {
        uint32_t it, g = lo + i;
        const per_buffer *src = g < 23 ? &a : &c;
        uint32_t slot = g < 23 ? (17 + g) % 23 : g - 23;
        memcpy(&it, b.items + 4 * i, 4);
        CHECK_EQ_U(it, g < 23 ? 17 + g : 100 + (g - 23));
        CHECK_EQ_F(per_tree_get(&b.tree, i), per_tree_get(&src->tree, slot));
        CHECK_EQ_U(b.ends[i], src->ends[slot]);
        CHECK_EQ_U(b.gen[i], 1);
        /* one new id per run of one source trajectory, from 0 */
        if (i == 0) {
          CHECK_EQ_U(b.traj[i], 0);
        } else {
          uint32_t ps = g - 1 < 23 ? (17 + g - 1) % 23 : g - 1 - 23;
          const per_buffer *pv = g - 1 < 23 ? &a : &c;
          int same = pv == src && pv->traj[ps] == src->traj[slot];
          CHECK_EQ_U(b.traj[i], prev + (same ? 0u : 1u));
        }
        prev = b.traj[i];
        seen[it] += 1;
      }
      CHECK_EQ_U(b.trajs, n ? (uint64_t)prev + 1 : 0);
      total += n;
      if (n) {
        uint64_t ids[4];
        CHECK_OK(per_buffer_sample(&b, 4, NULL, NULL, ids, NULL));
      }
      per_buffer_free(&b);
    }
    CHECK_EQ_U(total, S);
    for (i = 17; i < 40; ++i) CHECK_EQ_U(seen[i], 1);
    for (i = 100; i < 109; ++i) CHECK_EQ_U(seen[i], 1);
  }
  /* after items of its own; alpha = 0 makes every leaf 1 */
  {
    per_config d = cfg_of(12, 4);
    d.alpha = 0;
    CHECK_OK(per_buffer_init(&b, &d, NULL));
    for (v = 0; v < 3; ++v) CHECK_OK(per_buffer_add(&b, &v));
    CHECK_OK(per_buffer_load_append(&b, fc, 2, 7));
    CHECK_OK(per_buffer_check(&b));
    CHECK_EQ_U(b.size, 10);
    CHECK_EQ_U(b.trajs, 10); /* each of c's adds was its own trajectory */
    CHECK_EQ_U(b.traj[3], 3);
    CHECK_EQ_U(b.traj[9], 9);
    for (i = 0; i < 10; ++i) CHECK_EQ_F(per_tree_get(&b.tree, i), 1);
    CHECK_OK(sample_unique(&b, 10));
    /* errors: past the file's items, more than fits, a full buffer,
       another item size, a damaged file; count 0 only checks */
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_load_append(&b, fc, 5, 5), PER_ERR_ARG);
    CHECK_STATUS(per_buffer_load_append(&b, fc, 10, 0), PER_ERR_ARG);
    CHECK_STATUS(per_buffer_load_append(&b, fc, 0, 3), PER_ERR_MISMATCH);
    CHECK_STATUS(per_buffer_load_append(NULL, fc, 0, 1), PER_ERR_NULL);
    CHECK_STATUS(per_buffer_load_append(&b, NULL, 0, 1), PER_ERR_NULL);
    CHECK_OK(per_buffer_load_append(&b, fc, 9, 0));
    CHECK_UNCHANGED(s, &b);
    CHECK_OK(per_buffer_load_append(&b, fc, 0, 2));
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_load_append(&b, fc, 0, 1), PER_ERR_MISMATCH);
    CHECK_UNCHANGED(s, &b);
    per_buffer_free(&b);
  }
  {
    per_config d = cfg_of(32, 8);
    unsigned char img[4096];
    long n;
    FILE *f = fopen(fc, "rb");
    CHECK(f != NULL);
    n = (long)fread(img, 1, sizeof img, f);
    fclose(f);
    CHECK_OK(per_buffer_init(&b, &d, NULL));
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_load_append(&b, fc, 0, 1), PER_ERR_MISMATCH);
    CHECK_UNCHANGED(s, &b);
    per_buffer_free(&b);
    d.item_size = 4;
    CHECK_OK(per_buffer_init(&b, &d, NULL));
    img[HDR + 5] ^= 1;
    CHECK(file_write(NAME("app_bad.bin"), img, n));
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_load_append(&b, NAME("app_bad.bin"), 0, 1),
                 PER_ERR_CHECKSUM);
    CHECK_UNCHANGED(s, &b);
    per_buffer_free(&b);
  }
  per_buffer_free(&a);
  per_buffer_free(&c);
  remove(fa);
  remove(fc);
  remove(NAME("app_bad.bin"));
}

/* per_file_write: the bytes and their CRC-32C, replacing the old file;
   a failed sync leaves the old one as it was and no temporary file. */
static void test_file_write(void) {
  const char *path = NAME("raw.bin");
  unsigned char img[64];
  const unsigned char msg[] = "123456789", two[] = "ab";
  long n;
  CHECK_OK(per_file_write(msg, 9, path, NULL));
  n = file_read(path, img, sizeof img);
  CHECK_EQ_U(n, 13);
  CHECK(memcmp(img, msg, 9) == 0);
  CHECK_EQ_U(img[9] | (uint32_t)img[10] << 8 | (uint32_t)img[11] << 16 |
                 (uint32_t)img[12] << 24,
             0xE3069283u); /* the check value of CRC-32C */
  t_sync.fail_file = 1;
  CHECK_STATUS(per_file_write(two, 2, path, NULL), PER_ERR_IO);
  t_sync.fail_file = 0;
  CHECK_EQ_U(file_read(path, img, sizeof img), 13);
  CHECK_EQ_U(count_tmp(path), 0);
  CHECK_OK(per_file_write(NULL, 0, path, NULL)); /* the CRC of nothing */
  CHECK_EQ_U(file_read(path, img, sizeof img), 4);
  CHECK_EQ_U(img[0] | img[1] | img[2] | img[3], 0);
  CHECK_STATUS(per_file_write(NULL, 1, path, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_file_write(msg, 1, NULL, NULL), PER_ERR_NULL);
  remove(path);
}

/* Allocation failure at each allocation of load (and of save): the error,
   the buffer unchanged, nothing leaked. */
static void test_alloc_failure(void) {
  per_config c = cfg_of(16, 4);
  per_buffer a, b;
  t_heap heap;
  long k, calls;
  memset(&heap, 0, sizeof heap);
  CHECK_OK(per_buffer_init(&a, &c, &heap));
  fill(&a, 20, 8);
  CHECK_OK(per_buffer_init(&b, &c, &heap));
  calls = heap.calls;
  CHECK_OK(per_buffer_save(&a, NAME("al.bin")));
  CHECK_EQ_U(heap.calls - calls, 1);
  heap.fail_at = heap.calls + 1;
  CHECK_STATUS(per_buffer_save(&a, NAME("al.bin")), PER_ERR_NOMEM);
  heap.fail_at = 0;
  calls = heap.calls;
  CHECK_OK(per_buffer_load(&b, NAME("al.bin")));
  CHECK(state_equal(&a, &b));
  calls = heap.calls - calls;
  CHECK_EQ_U(calls, 2);
  per_buffer_free(&b);
  CHECK_OK(per_buffer_init(&b, &c, &heap));
  for (k = 1; k <= calls; ++k) {
    long live = heap.live;
    bsnap s = bsnap_take(&b);
    heap.fail_at = heap.calls + k;
    CHECK_STATUS(per_buffer_load(&b, NAME("al.bin")), PER_ERR_NOMEM);
    CHECK_UNCHANGED(s, &b);
    CHECK_EQ_U(heap.live, live);
    heap.fail_at = heap.calls + k; /* the shard path too */
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_load_shard(&b, NAME("al.bin"), 0, 2),
                 PER_ERR_NOMEM);
    CHECK_UNCHANGED(s, &b);
    CHECK_EQ_U(heap.live, live);
  }
  { /* an append allocates once: the file's bytes */
    long live = heap.live;
    bsnap s = bsnap_take(&b);
    heap.fail_at = heap.calls + 1;
    CHECK_STATUS(per_buffer_load_append(&b, NAME("al.bin"), 0, 1),
                 PER_ERR_NOMEM);
    CHECK_UNCHANGED(s, &b);
    CHECK_EQ_U(heap.live, live);
  }
  heap.fail_at = 0;
  per_buffer_free(&a);
  per_buffer_free(&b);
  CHECK_EQ_U(heap.live, 0);
  remove(NAME("al.bin"));
}

/* A version 1 file (per 0.2.0) loads: the state its operations give now,
   every episode end PER_END_NONE, the same next batches; also as a
   shard. A version 1 file cut or patched is refused as before. */
static void test_version1(void) {
  const unsigned char *img = IS_FLOAT ? ckpt_v1_float : ckpt_v1_double;
  long n = IS_FLOAT ? (long)sizeof ckpt_v1_float : (long)sizeof ckpt_v1_double;
  static unsigned char bad[1024];
  per_buffer a, b;
  per_status worst = PER_OK;
  uint64_t ia[6], ib[6];
  float wa[6], wb[6];
  uint32_t i;
  int k;
  bsnap s;
  CHECK(file_write(NAME("v1.bin"), img, n));
  v1_ops(&a, &worst);
  CHECK_OK(worst);
  CHECK_OK(per_buffer_init(&b, &a.cfg, NULL));
  CHECK_OK(per_buffer_load(&b, NAME("v1.bin")));
  CHECK_OK(per_buffer_check(&b));
  CHECK(state_equal(&a, &b));
  for (i = 0; i < b.cfg.capacity; ++i) CHECK_EQ_U(b.ends[i], PER_END_NONE);
  for (k = 0; k < 3; ++k) {
    CHECK_OK(per_buffer_sample(&a, 6, NULL, NULL, ia, wa));
    CHECK_OK(per_buffer_sample(&b, 6, NULL, NULL, ib, wb));
    CHECK(memcmp(ia, ib, sizeof ia) == 0 && memcmp(wa, wb, sizeof wa) == 0);
  }
  /* saved again, it is a version 3 file that loads into a */
  CHECK_OK(per_buffer_save(&b, NAME("v2.bin")));
  CHECK_OK(per_buffer_load(&a, NAME("v2.bin")));
  CHECK(state_equal(&a, &b));
  CHECK_OK(per_buffer_load_shard(&b, NAME("v1.bin"), 1, 2));
  CHECK_OK(per_buffer_check(&b));
  CHECK_EQ_U(b.size, 8);
  /* cut short (in the header and in the body), one byte flipped */
  for (k = 0; k < 3; ++k) {
    long len = k == 0 ? 100 : k == 1 ? n - 1 : n;
    memcpy(bad, img, (size_t)n);
    if (k == 2) bad[300] ^= 0x10;
    CHECK(file_write(NAME("bad.bin"), bad, len));
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_load(&b, NAME("bad.bin")),
                 k == 2 ? PER_ERR_CHECKSUM : PER_ERR_TRUNCATED);
    CHECK_UNCHANGED(s, &b);
  }
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("v1.bin"));
  remove(NAME("v2.bin"));
  remove(NAME("bad.bin"));
}

/* Version 2 files (per 0.3.0: sequences, ends, trajectories, no layout)
   load into the state the same calls give now, and their header reads. */
static void test_version2(void) {
  const unsigned char *img = IS_FLOAT ? ckpt_v2_float : ckpt_v2_double;
  long n = IS_FLOAT ? (long)sizeof ckpt_v2_float : (long)sizeof ckpt_v2_double;
  per_buffer a, b;
  per_status worst = PER_OK;
  per_ckpt_info info;
  per_sample_opts o;
  uint64_t ia[6], ib[6];
  float wa[6], wb[6];
  uint32_t i;
  int k;
  CHECK(file_write(NAME("v2.bin"), img, n));
  v2_ops(&a, &worst);
  CHECK_OK(worst);
  CHECK_OK(per_ckpt_read_info(NAME("v2.bin"), &info));
  CHECK_EQ_U(info.version, 2);
  CHECK_EQ_U(info.real_bytes, sizeof(per_real));
  CHECK_EQ_U(info.size, a.size);
  CHECK_EQ_U(info.added, a.added);
  CHECK_EQ_U(info.step, a.step);
  CHECK(info.layout[0] == 0);
  CHECK(memcmp(&info.cfg, &a.cfg, sizeof a.cfg) == 0);
  CHECK_OK(per_buffer_init(&b, &info.cfg, NULL));
  CHECK_OK(per_buffer_load(&b, NAME("v2.bin")));
  CHECK_OK(per_buffer_check(&b));
  CHECK(state_equal(&a, &b));
  CHECK(memcmp(a.ends, b.ends, a.cfg.capacity) == 0);
  CHECK(memcmp(a.seq_ok, b.seq_ok, a.seq_tree.capacity) == 0);
  memset(&o, 0, sizeof o);
  for (k = 0; k < 4; ++k) {
    o.flags = k % 2 ? PER_SAMPLE_SEQUENCES : 0;
    CHECK_OK(per_buffer_sample(&a, 6, &o, NULL, ia, wa));
    CHECK_OK(per_buffer_sample(&b, 6, &o, NULL, ib, wb));
    CHECK(memcmp(ia, ib, sizeof ia) == 0 && memcmp(wa, wb, sizeof wa) == 0);
  }
  /* saved again it is a version 3 file; its header says so */
  CHECK_OK(per_buffer_save(&b, NAME("v3.bin")));
  CHECK_OK(per_ckpt_read_info(NAME("v3.bin"), &info));
  CHECK_EQ_U(info.version, PER_CKPT_VERSION);
  CHECK_OK(per_buffer_load(&a, NAME("v3.bin")));
  CHECK(state_equal(&a, &b));
  for (i = 0; i < 3; ++i)
    CHECK_OK(per_buffer_load_shard(&b, NAME("v2.bin"), i, 3));
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("v2.bin"));
  remove(NAME("v3.bin"));
}

/* The items' layout: kept by checkpoints, compared on load (a file and a
   buffer that both name one must agree), taken by a buffer that names
   none; and per_ckpt_read_info, to make the buffer a file needs. */
static void test_layout(void) {
  static const char f32x2[] = "float32 obs[2]", i32x2[] = "int32 obs[2]";
  static char longest[PER_LAYOUT_MAX + 1];
  per_config c = cfg_of(9, 8);
  per_buffer a, b;
  per_ckpt_info info;
  bsnap s;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  fill(&a, 12, 5);
  CHECK_OK(per_buffer_set_layout(&a, f32x2));
  CHECK_STR(a.layout, f32x2);
  CHECK_OK(per_buffer_save(&a, NAME("lay.bin")));
  CHECK_OK(per_ckpt_read_info(NAME("lay.bin"), &info));
  CHECK_STR(info.layout, f32x2);
  CHECK(memcmp(&info.cfg, &a.cfg, sizeof a.cfg) == 0);
  CHECK_EQ_U(info.size, a.size);
  /* another layout of the same item size: refused, and said */
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_set_layout(&b, i32x2));
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_load(&b, NAME("lay.bin")), PER_ERR_MISMATCH);
  CHECK_UNCHANGED(s, &b);
  CHECK_STR(b.error, "the checkpoint's layout \"float32 obs[2]\" is not the "
                     "buffer's \"int32 obs[2]\"");
  CHECK_STATUS(per_buffer_load_append(&b, NAME("lay.bin"), 0, 1),
               PER_ERR_MISMATCH);
  CHECK_STATUS(per_buffer_load_shard(&b, NAME("lay.bin"), 0, 2),
               PER_ERR_MISMATCH);
  /* the same layout loads; no layout takes the file's */
  CHECK_OK(per_buffer_set_layout(&b, f32x2));
  CHECK_OK(per_buffer_load(&b, NAME("lay.bin")));
  CHECK(state_equal(&a, &b));
  per_buffer_free(&b);
  CHECK_OK(per_buffer_init(&b, &info.cfg, NULL));
  CHECK_OK(per_buffer_load(&b, NAME("lay.bin")));
  CHECK_STR(b.layout, f32x2);
  CHECK(state_equal(&a, &b));
  /* a file without one loads into any buffer, which keeps its own */
  CHECK_OK(per_buffer_set_layout(&a, ""));
  CHECK_OK(per_buffer_save(&a, NAME("lay.bin")));
  CHECK_OK(per_buffer_set_layout(&b, i32x2));
  CHECK_OK(per_buffer_load(&b, NAME("lay.bin")));
  CHECK_STR(b.layout, i32x2);
  /* bounds */
  memset(longest, 'x', PER_LAYOUT_MAX - 1);
  CHECK_OK(per_buffer_set_layout(&a, longest));
  CHECK_OK(per_buffer_save(&a, NAME("lay.bin")));
  CHECK_OK(per_ckpt_read_info(NAME("lay.bin"), &info));
  CHECK_EQ_U(strlen(info.layout), PER_LAYOUT_MAX - 1);
  longest[PER_LAYOUT_MAX - 1] = 'x';
  CHECK_STATUS(per_buffer_set_layout(&a, longest), PER_ERR_ARG);
  CHECK_STR(a.error, "layout has 512 chars, at most 511");
  CHECK_EQ_U(strlen(a.layout), PER_LAYOUT_MAX - 1);
  CHECK_STATUS(per_buffer_set_layout(&a, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_ckpt_read_info(NAME("no-such.bin"), &info), PER_ERR_IO);
  CHECK_STATUS(per_ckpt_read_info(NULL, &info), PER_ERR_NULL);
  CHECK_STATUS(per_ckpt_read_info(NAME("lay.bin"), NULL), PER_ERR_NULL);
  per_buffer_free(&a);
  per_buffer_free(&b);
  remove(NAME("lay.bin"));
}

/* A file of the other PER_REAL (its leaves 4 bytes where ours are 8, or
   8 where 4), made from one of ours: its header reads, and a load says
   the leaf size differs. */
static void test_other_real(void) {
  static unsigned char img[4096], other[4096];
  per_config c = cfg_of(9, 8);
  per_buffer a;
  per_ckpt_info info;
  const long items = 9 * 8 + 9 * 4, mine = (long)sizeof(per_real);
  const long theirs = 12 - mine;
  long n, m, i;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  fill(&a, 12, 5);
  CHECK_OK(per_buffer_save(&a, NAME("real.bin")));
  n = file_read(NAME("real.bin"), img, sizeof img);
  /* header, items and generations; the leaves converted; the rest */
  memcpy(other, img, (size_t)(HDR + items));
  for (i = 0; i < 9; ++i) {
    per_real v;
    unsigned char *to = other + HDR + items + i * theirs;
    memcpy(&v, img + HDR + items + i * mine, sizeof v);
    if (theirs == 4) {
      float f = (float)v;
      memcpy(to, &f, 4);
    } else {
      double d = (double)v;
      memcpy(to, &d, 8);
    }
  }
  m = HDR + items + 9 * theirs;
  memcpy(other + m, img + HDR + items + 9 * mine,
         (size_t)(n - (HDR + items + 9 * mine)));
  m += n - (HDR + items + 9 * mine);
  put32(other + 20, (uint32_t)theirs);
  put32(other + 184, (uint32_t)m); /* the file size, u64 */
  fix_crc(other, m);
  CHECK(file_write(NAME("real.bin"), other, m));
  CHECK_OK(per_ckpt_read_info(NAME("real.bin"), &info));
  CHECK_EQ_U(info.real_bytes, theirs);
  CHECK_STATUS(per_buffer_load(&a, NAME("real.bin")), PER_ERR_MISMATCH);
  CHECK_STR(a.error, theirs == 4 ? "the checkpoint's bytes per leaf 4, the "
                                   "buffer's 8 (PER_REAL)"
                                 : "the checkpoint's bytes per leaf 8, the "
                                   "buffer's 4 (PER_REAL)");
  per_buffer_free(&a);
  remove(NAME("real.bin"));
}

int main(void) {
  test_crc();
  test_round_trip();
  test_corruption();
  test_load_mem();
  test_foreign();
  test_permutation();
  test_failed_save();
  test_concurrent_saves();
  test_load_directory();
  test_lying_header();
  test_generation_wrap();
  test_shards();
  test_append();
  test_file_write();
  test_alloc_failure();
  test_version1();
  test_version2();
  test_layout();
  test_other_real();
  return t_done(IS_FLOAT ? "checkpoint (float)" : "checkpoint (double)");
}
