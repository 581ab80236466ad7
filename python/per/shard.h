/* What per._mpi needs of a ReplayBuffer of per._per: a capsule
   (ReplayBuffer._shard(), named PYPER_SHARD_NAME) holding this struct.
   Both extensions embed their own copy of per.h, built the same way, so
   the per_buffer is one layout in both; the version and size are checked
   before per._mpi touches it. Every use of b holds lock (the buffer's
   own, as every call of per._per does); *exports counts the views of the
   item ring that are alive (a call that may move the ring refuses while
   there are any). */
#ifndef PYPER_SHARD_H
#define PYPER_SHARD_H

/* A buffer's capsule names its node type: per._per32's buffers (float
   nodes, PYPER_F32) reach only an extension built for float too. */
#ifdef PYPER_F32
#define PYPER_SHARD_NAME "per._per32.shard"
#else
#define PYPER_SHARD_NAME "per._per.shard"
#endif

typedef struct pyper_shard {
  unsigned version; /* PER_VERSION of the per.h that made it */
  size_t size;      /* sizeof(per_buffer) there */
  per_buffer *b;
  PyThread_type_lock lock;
  Py_ssize_t *exports;
} pyper_shard;

#endif
