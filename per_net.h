/* per_net.h - replay over the network, a companion of per.h: named tables
   of per_buffer answering the requests of docs/PROTOCOL.md, one message
   in, one message out, with no transport of its own (per-server carries
   them over ZeroMQ; so does Python's per.net.Server).
   (no warranty; LICENSE: see the end of per.h)

   Do this, in *one* C or C++ file:
      #define PER_IMPLEMENTATION
      #include "per.h"
      #define PER_NET_IMPLEMENTATION
      #include "per_net.h"
   The implementation is compiled in the file that compiles per.h's: it
   uses per.h's messages (per.h's >>rules). Every other file includes
   per_net.h alone; it includes per.h. PER_STATIC and PER_MALLOC/PER_FREE
   are per.h's options and mean here what they mean there. A table's
   nodes are PER_REAL's; the wire format does not depend on it.

   CONTENTS
      Declarations ....... per_net_server, per_net_table, per_net_*   >>api
      A client over ZeroMQ ........ per_net_client, per_net_client_* >>client
      Implementation: tables, specs, requests, replies ...........  >>net
      Implementation: the client .......................... >>client_impl
      (grep for the >>markers)

   WHAT IT IS
      A server holds tables, each a per_buffer with a name, and turns one
      request (bytes, as they came off the network) into one reply
      (bytes, in the server's memory): per_net_handle. It never reads
      past a request's length, never trusts a length or count it holds
      before checking it against the bytes that are there, and answers
      every request, also one it cannot parse, with a status and a
      message. A refused request changes nothing. Not safe for concurrent
      use: one thread serves (per_buffer's own rule).

   THE CLIENT (compiled where zmq.h was included before per_net.h)
      per_net_client speaks to one table of a server over a ZeroMQ DEALER
      socket, so that a C or C++ actor or learner needs no Python:
      per_net_client_open (HELLO), _insert, _sample, _update, _info and
      _close, each waiting for its reply at most timeout_ms (>>client
      says what every refusal leaves). The program links libzmq.
         #include <zmq.h>
         #include "per_net.h"
         per_net_client c;
         if (per_net_client_open(&c, "tcp://127.0.0.1:50051", "replay", 44,
                                 "", 10000) != PER_OK)
           fprintf(stderr, "%s\n", c.error);        // no server, ...
         per_net_client_insert(&c, items, n, NULL, NULL, NULL);
         per_net_client_close(&c);

   QUICK START (one request; per-server, server/per_server.c, serves)
      per_net_server srv;
      per_config cfg = per_config_default(100000, 44);
      unsigned char req[64] = "PERQ";            // a request off the network
      const void *reply;                         // the reply to send back
      size_t reply_len;
      if (per_net_init(&srv, PER_NET_MAX_MESSAGE, NULL) != PER_OK) return 1;
      if (per_net_add_table(&srv, "replay", &cfg, "") != PER_OK) return 1;
      per_net_handle(&srv, req, sizeof req, &reply, &reply_len);
      per_net_free(&srv);

   HISTORY
      0.5.0  (unreleased) new: the wire format's version 1 (HELLO,
             INSERT, SAMPLE, UPDATE, INFO), tables from a spec text, a
             client over ZeroMQ (per_net_client), once-only request ids
             (PER_NET_ONCE), checkpoints of the whole server
             (per_net_save, per_net_restore), CURVE keys
             (per_net_client_open_curve), replies given away unsent
             (per_net_take_reply, per_net_reply_free).
*/
#ifndef PER_NET_H_INCLUDED
#define PER_NET_H_INCLUDED

#include "per.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
   Declarations                                                       >>api
   ====================================================================== */

#define per_net_init PERI_NAME(per_net_init)
#define per_net_free PERI_NAME(per_net_free)
#define per_net_add_table PERI_NAME(per_net_add_table)
#define per_net_add_spec PERI_NAME(per_net_add_spec)
#define per_net_find PERI_NAME(per_net_find)
#define per_net_handle PERI_NAME(per_net_handle)
#define per_net_take_reply PERI_NAME(per_net_take_reply)
#define per_net_reply_free PERI_NAME(per_net_reply_free)
#define per_net_set_limiter PERI_NAME(per_net_set_limiter)
#define per_net_load PERI_NAME(per_net_load)
#define per_net_save PERI_NAME(per_net_save)
#define per_net_restore PERI_NAME(per_net_restore)

/* The wire format's version (docs/PROTOCOL.md). */
#define PER_NET_VERSION 1
/* Bytes of a table's name, its NUL included: names are 1 .. 63 bytes. */
#define PER_NET_NAME_MAX 64
/* The largest request or reply a server makes or takes by default. */
#define PER_NET_MAX_MESSAGE (UINT64_C(64) << 20)
/* The smallest max_message per_net_init accepts. */
#define PER_NET_MIN_MESSAGE UINT64_C(4096)
/* Bytes of a reply's header; its body starts there. */
#define PER_NET_REPLY_HEADER 24u

/* A request id with this bit set is once-only (docs/PROTOCOL.md, "Once-
   only requests"): an INSERT or UPDATE that carries one is applied at
   most once by its table, and a repeat of it gets the first reply. */
#define PER_NET_ONCE (UINT64_C(1) << 63)
/* Once-only requests a table remembers: the last PER_NET_RECALL INSERTs
   and UPDATEs it applied (a power of two, 2 .. 2^30; about 40 bytes
   each, allocated at a table's first once-only request). */
#ifndef PER_NET_RECALL
#define PER_NET_RECALL 4096u
#endif
/* The file of a checkpoint directory that names its generation
   (per_net_save). */
#define PER_NET_STATE_FILE "server.state"

/* Ops (a request's u16 op) */
enum {
  PER_NET_HELLO = 1,  /* item size and layout checked against the table's */
  PER_NET_INSERT = 2, /* items as one trajectory */
  PER_NET_SAMPLE = 3, /* a batch: ids, weights, items, masks */
  PER_NET_UPDATE = 4, /* priorities from TD errors */
  PER_NET_INFO = 5    /* sizes and counters */
};
/* INSERT flags */
enum { PER_NET_ENDS = 1u << 0, PER_NET_TD = 1u << 1 };
/* UPDATE flags */
enum { PER_NET_SEQUENCES = 1u << 0 };
/* SAMPLE want */
enum { PER_NET_NO_ITEMS = 1u << 0 };

/* A table: a per_buffer with a name and what it served. The buffer is
   the caller's to read, and to change through per.h's functions between
   requests (per_buffer_load of a checkpoint, say). */
typedef struct per_net_table {
  char name[PER_NET_NAME_MAX];
  per_buffer buf;
  uint64_t inserts, samples, updates; /* requests applied */
  uint64_t refused;                   /* requests for it refused */
  /* The rate limiter (per_net_set_limiter; docs/PROTOCOL.md): */
  uint64_t min_size;         /* items stored before a sample (0: none) */
  double samples_per_insert; /* 0: no ratio */
  double error_margin;       /* >= 0 */
  uint64_t items_in;         /* items inserted, as it counts them */
  uint64_t items_out;        /* items sampled (B a sample) */
  uint64_t busy;             /* requests it held back (PER_ERR_BUSY) */
  uint64_t repeats;          /* once-only requests answered from memory */
  /* The once-only requests applied (private): the last PER_NET_RECALL
     in a ring, indexed by a hash of their ids; NULL before the first. */
  struct peri_net_seen *seen;
  uint32_t *seen_slots;
  uint64_t seen_count; /* once-only requests remembered so far */
} per_net_table;

/* A plain struct: declare one and per_net_init it. Fields are readable;
   change them only through the functions. */
typedef struct per_net_server {
  per_net_table **tables; /* ntables tables, in the order added */
  uint32_t ntables;
  uint64_t max_message; /* the largest request or reply, bytes */
  unsigned char *out;   /* the last reply (out_cap bytes; NULL from
                           per_net_take_reply to the next reply) */
  size_t out_cap;
  unsigned char *scratch; /* aligned copies of a request's ids and TD */
  size_t scratch_cap;
  unsigned char fallback[PER_NET_REPLY_HEADER + 192]; /* a refusal's reply
                                                         when out cannot
                                                         grow */
  uint64_t requests, refused; /* all requests, and those refused */
  uint64_t repeats;           /* once-only requests answered from memory */
  uint64_t generation; /* the checkpoint last saved or restored (0: none) */
  void *alloc_ctx;
  char error[192]; /* what the last refused call refused ("" after a
                      successful one); a request's refusal is its
                      reply's message */
} per_net_server;

/* An empty server whose requests and replies are at most max_message
   bytes (PER_NET_MAX_MESSAGE is 64 MiB). alloc_ctx goes to
   PER_MALLOC/PER_FREE. Errors: PER_ERR_NULL (s), PER_ERR_ARG
   (max_message < PER_NET_MIN_MESSAGE or above SIZE_MAX / 2); *s is then
   zeroed but for s->error, and per_net_free accepts it. */
PERDEF per_status per_net_init(per_net_server *s, uint64_t max_message,
                               void *alloc_ctx);
/* Free every table and the server's memory, and zero *s. Safe on a
   zeroed server and on NULL. */
PERDEF void per_net_free(per_net_server *s);
/* A table named `name` (1 .. 63 bytes, no control characters), a new
   per_buffer of cfg (per_buffer_init) whose layout is `layout`
   (per_buffer_set_layout; "" or NULL for unknown). Errors (the server
   unchanged, s->error says why): PER_ERR_NULL (s, name or cfg),
   PER_ERR_ARG (a name of another length or with a control character, a
   name already taken, a layout too long), per_buffer_init's errors
   (cfg), PER_ERR_NOMEM. */
PERDEF per_status per_net_add_table(per_net_server *s, const char *name,
                                    const per_config *cfg, const char *layout);
/* Tables from a spec text: lines of `key value`; `table NAME` starts a
   table, and the keys after it up to the next `table` are per_config's
   fields (capacity, item_size, alpha, beta0, beta1, beta_steps, eps,
   max_priority, seed, flags, max_unique, seq_len, seq_stride, seq_eta),
   the rate limiter's (min_size, samples_per_insert, error_margin:
   per_net_set_limiter), each at most once, and `layout`, whose value is
   the rest of its line
   (trailing blanks dropped). Fields not named keep per_config_default's
   value for the table's capacity and item_size, which are required.
   flags is a number or names joined by `|`: weights_buffer_max,
   seq_cross_episodes, max_live. Blank lines and lines starting with `#`
   are skipped; blanks around keys and values are ignored. Numbers are
   decimal (integers) or as strtod reads them (reals); a value must be
   the whole rest of its line. Every table of the text is added, or (on
   an error) none: Errors: PER_ERR_NULL (s or text), PER_ERR_ARG (an
   unknown key, a key twice, a bad number, a key before `table`, a table
   without capacity or item_size; s->error names the line), and those of
   per_net_add_table. */
PERDEF per_status per_net_add_spec(per_net_server *s, const char *text);
/* The table named by the len bytes at name, or NULL. */
PERDEF per_net_table *per_net_find(const per_net_server *s, const char *name,
                                   size_t len);
/* Table t's rate limiter (docs/PROTOCOL.md, "Rate limiting"): a sample
   is answered PER_ERR_BUSY while t holds fewer than min_size items or,
   with samples_per_insert > 0, while d = items_in * samples_per_insert -
   items_out < samples_per_insert * min_size - error_margin; an insert
   while d > samples_per_insert * min_size + error_margin. A table starts
   with min_size 0 (an empty table's sample is per_buffer_sample's
   PER_ERR_EMPTY), samples_per_insert 0 (no ratio), error_margin 0 and
   both counts 0; setting the limiter keeps the counts. Errors (t
   unchanged, s->error says why): PER_ERR_NULL (s or t), PER_ERR_ARG
   (min_size above t's capacity, samples_per_insert or error_margin NaN,
   infinite or negative). */
PERDEF per_status per_net_set_limiter(per_net_server *s, per_net_table *t,
                                      uint64_t min_size,
                                      double samples_per_insert,
                                      double error_margin);
/* per_buffer_load of the checkpoint at path into table t, then its
   limiter's counts as if its items had just come in at the ratio:
   items_in = the items stored, items_out such that d is the middle of
   its range (0 when that would be negative). Errors: per_buffer_load's
   (t unchanged but for its buffer's error; s->error says it),
   PER_ERR_NULL. Compiled out with PER_NO_STDIO, as per_buffer_load. */
#ifndef PER_NO_STDIO
PERDEF per_status per_net_load(per_net_server *s, per_net_table *t,
                               const char *path);
/* Checkpoint the whole server into the directory dir (which must exist;
   one server a directory): each table's buffer by per_buffer_save to
   dir/table-K.G.per (K its position, G the save's generation: one more
   than dir's last and than s->generation), then dir/server.state
   (PER_NET_STATE_FILE), written as per_file_write writes (a temporary
   file renamed, fsyncs, CRC-32C): G, and each table's name, request
   counters, rate limiter's counts and remembered once-only requests.
   The save takes effect when server.state is renamed into place: a crash
   before that leaves the previous checkpoint whole (the next save
   overwrites the table files left behind); after it, the previous
   generation's table files are removed. A table file is a plain
   checkpoint (per_buffer_load, per_ckpt_read_info, Python's
   ReplayBuffer.load read it). s->generation gets G. Errors (dir's
   previous checkpoint stays whole; s->error names the file):
   PER_ERR_NULL, PER_ERR_NOMEM, PER_ERR_IO (per_buffer_save's,
   per_file_write's: a missing directory, a full disk). */
PERDEF per_status per_net_save(per_net_server *s, const char *dir);
/* Give the tables the state of per_net_save's checkpoint in dir: each
   buffer (per_buffer_load; the config's alpha, beta and eps come from the
   file, as there), the request counters, the rate limiter's counts (its
   settings stay the table's) and the once-only requests remembered, so
   that a repeat of a request the saved server applied is not applied
   again. dir must hold exactly the server's tables, by name, in any
   order. Everything that can be checked before a table changes is: the
   state file whole (CRC-32C), the names, each table file's header, its
   capacity and item size, and the memory for the requests remembered; a
   table file that fails later (its own checksum, per_buffer_load's
   memory) leaves the tables before it restored and the rest as they
   were: do not serve then. s->generation gets the checkpoint's. Errors
   (s->error says which file): PER_ERR_NULL, PER_ERR_IO (no readable
   dir/server.state), PER_ERR_FORMAT, PER_ERR_VERSION, PER_ERR_CHECKSUM,
   PER_ERR_CORRUPT (the state file's), PER_ERR_MISMATCH (another set of
   tables, a table file of another capacity or item size),
   PER_ERR_NOMEM, and per_buffer_load's of a table file. Both compiled
   out with PER_NO_STDIO. */
PERDEF per_status per_net_restore(per_net_server *s, const char *dir);
#endif
/* Answer one request: the len bytes at req (docs/PROTOCOL.md; any bytes
   at all are accepted, and read only within len). *reply and *reply_len
   get the reply, in the server's memory, valid until the next call on s.
   Returns the reply's status (PER_OK when the request was applied), and
   on any other status nothing was changed but the counters (s->requests,
   s->refused, the table's refused). Every call makes a reply, so *reply
   is never NULL after it, unless s, reply or reply_len is NULL
   (PER_ERR_NULL, nothing written). */
PERDEF per_status per_net_handle(per_net_server *s, const void *req, size_t len,
                                 const void **reply, size_t *reply_len);
/* Give the reply per_net_handle just made to the caller, so that a
   transport can send it without copying it (ZeroMQ's zmq_msg_init_data:
   per-server sends replies of 64 KiB and more so). When reply is the
   start of s's reply memory (every reply but a refusal s had no memory
   to write, which is in s itself), returns that block, which is the
   caller's from then on, and s allocates another at its next reply;
   otherwise returns NULL and changes nothing (copy the reply then). NULL
   for NULL s. Free the block with per_net_reply_free(block,
   s->alloc_ctx), from any thread where the allocator's PER_FREE may be
   called from any thread (the C library's free may). */
PERDEF void *per_net_take_reply(per_net_server *s, const void *reply);
/* Free a block per_net_take_reply gave (NULL: nothing), alloc_ctx the
   server's: the shape of ZeroMQ's zmq_free_fn, which it can be. */
PERDEF void per_net_reply_free(void *block, void *alloc_ctx);

/* ======================================================================
   A client over ZeroMQ (zmq.h included before per_net.h)          >>client
   ====================================================================== */

/* Compiled only where ZeroMQ's header (zmq.h, which defines
   ZMQ_VERSION_MAJOR) was included before the first per_net.h; then
   PER_NET_CLIENT is defined. The program links libzmq. A client speaks
   to one table of a server (per-server, or Python's per.net.Server) over
   one DEALER socket, one request at a time: each call builds its request
   in c->buf, sends it as one frame and waits (zmq_poll) up to
   c->timeout_ms for the reply with the same request id, dropping replies
   with other ids (late replies to requests that timed out; counted in
   c->dropped). Request ids are once-only (PER_NET_ONCE set,
   docs/PROTOCOL.md): the low 63 bits count up from a random start
   (/dev/urandom's bits where there are some, mixed with the time and
   addresses), so a server applies an INSERT or UPDATE at most once
   however often it is sent.

   Every call returns PER_OK or an error, with c->error ("" after PER_OK)
   saying why:
   - its own arguments refused: PER_ERR_NULL, PER_ERR_ARG, PER_ERR_BATCH
     (c->error names the argument; a client not open, or timeout_ms <= 0:
     PER_ERR_ARG), nothing sent;
   - a request larger than c->max_message: PER_ERR_BATCH, nothing sent
     (a server drops such a request's connection: raise max_message only
     with the server's --max-message);
   - no reply within c->timeout_ms: the socket is closed and opened
     again (a server that restarted, or a connection that broke, is
     reached afresh), and with c->resend (1 after open) the request is
     sent once more with its id and waited for as long again (counted in
     c->resent): a server that applied it answers from memory (INSERT,
     UPDATE; a SAMPLE is drawn again). When that wait ends too, or
     without resend: PER_ERR_IO, c->error "FN: no reply within N ms from
     ENDPOINT"; the request may have been applied, once. Closing drops a
     request still queued (no server there yet) instead of sending it
     later; a late reply would come to the closed socket, and ids would
     drop it anyway. Also PER_ERR_IO: ZeroMQ refused a send, a poll or
     the reconnection (c->error has its words);
   - the server refused the request: its status, c->error the reply's
     message (cut to fit, NUL-terminated). With c->busy_wait (1 after
     open; the caller may change it), a PER_ERR_BUSY reply (the table's
     rate limiter, docs/PROTOCOL.md) is sent again with the same request
     id after a sleep of 1 ms, doubling up to 50 ms, while timeout_ms in
     all has not passed; then PER_ERR_BUSY is returned (c->retries counts
     the requests sent again; a retry whose reply does not come within
     what is left of timeout_ms is PER_ERR_IO as above). Without
     busy_wait, PER_ERR_BUSY at once;
   - a reply that is not per's (magic, version, op, a body not of the
     op's length or not of the request's shape): PER_ERR_FORMAT.
   Outputs are written only on PER_OK. Memory: c->buf and the endpoint's
   copy are PER_MALLOC's with a NULL alloc_ctx; each client has a ZeroMQ
   context of its own (one I/O thread). Not safe for concurrent use: one
   thread at a time (ZeroMQ's sockets' rule). */
#ifdef ZMQ_VERSION_MAJOR
#define PER_NET_CLIENT 1

#define per_net_client_open PERI_NAME(per_net_client_open)
#define per_net_client_insert PERI_NAME(per_net_client_insert)
#define per_net_client_sample PERI_NAME(per_net_client_sample)
#define per_net_client_update PERI_NAME(per_net_client_update)
#define per_net_client_info PERI_NAME(per_net_client_info)
#define per_net_client_close PERI_NAME(per_net_client_close)
#define per_net_client_open_curve PERI_NAME(per_net_client_open_curve)

/* A table's sizes and counters, as INFO gives them (docs/PROTOCOL.md). */
typedef struct per_net_info {
  uint32_t capacity, item_size;
  uint32_t size; /* items stored */
  uint32_t seq_len;
  uint64_t added, trajectories;       /* items and trajectories added */
  uint64_t step;                      /* sample calls: the beta schedule's */
  double beta;                        /* the next scheduled beta */
  uint64_t inserts, samples, updates; /* requests applied since the
                                         server started */
  uint64_t refused;                   /* requests for the table refused */
  /* the rate limiter's: items inserted and sampled as it counts them,
     requests it answered busy, and its settings; all 0 from a server
     without one (an INFO body of 80 bytes) */
  uint64_t items_inserted, items_sampled, busy, min_size;
  double samples_per_insert, error_margin;
} per_net_info;

/* A plain struct: declare one and per_net_client_open it. Fields are
   readable; timeout_ms, busy_wait and max_message are the caller's to
   change between calls, the others only the functions'. */
typedef struct per_net_client {
  void *ctx, *sock; /* ZeroMQ's context and DEALER socket (sock NULL
                       while a reconnection after a timeout failed: the
                       next call tries again) */
  char *endpoint;   /* a copy of open's */
  char table[PER_NET_NAME_MAX];
  uint64_t next_id;     /* the next request's id */
  int timeout_ms;       /* a reply's wait, busy retries included: > 0 */
  int busy_wait;        /* 1: retry PER_ERR_BUSY within timeout_ms */
  int resend;           /* 1: a request without a reply within timeout_ms
                           is sent once more, on a new connection */
  uint64_t max_message; /* the largest request sent (PER_NET_MAX_MESSAGE,
                           the server's default) */
  unsigned char *buf;   /* the request being built (cap bytes) */
  size_t cap;
  uint32_t item_size, seq_len; /* the table's (from HELLO) */
  per_config table_cfg;        /* the table's config (from HELLO) */
  char layout[PER_LAYOUT_MAX]; /* the table's layout (from HELLO) */
  uint64_t requests; /* requests sent (a busy retry not counted again) */
  uint64_t retries;  /* busy requests sent again */
  uint64_t dropped;  /* replies dropped: another request id */
  uint64_t resent;   /* requests sent again after a timeout */
  /* CURVE (per_net_client_open_curve): the server's public key, this
     client's public and secret keys, Z85; "" without CURVE */
  char curve_server[41], curve_public[41], curve_secret[41];
  char error[192]; /* what the last call refused; "" after PER_OK */
} per_net_client;

/* Connect to table `table` (1 .. 63 bytes, no control characters) of the
   server at `endpoint` (a ZeroMQ endpoint: tcp://HOST:PORT, ipc://PATH)
   and say HELLO: item_size and layout ("" or NULL: not checked) must be
   the table's. item_size 0: learn it first (INFO), then HELLO with it.
   timeout_ms (> 0) bounds each call's wait for its reply; busy_wait is
   set to 1, max_message to PER_NET_MAX_MESSAGE. On PER_OK, c->item_size,
   c->seq_len, c->table_cfg and c->layout are the table's. ZeroMQ's
   connect does not wait for the server, so a server that is not there
   shows as HELLO's timeout. Errors (*c then zeroed but for c->error, and
   per_net_client_close accepts it): PER_ERR_NULL (c, endpoint, table),
   PER_ERR_ARG (a bad table name, timeout_ms <= 0, a layout of
   PER_LAYOUT_MAX chars or more, an endpoint ZeroMQ refuses),
   PER_ERR_NOMEM, PER_ERR_IO (ZeroMQ's context or socket, or no reply),
   PER_ERR_MISMATCH (HELLO: another item size or layout; the server's
   message), PER_ERR_INDEX (no table of that name), and the others above
   (PER_ERR_FORMAT, ...). */
PERDEF per_status per_net_client_open(per_net_client *c, const char *endpoint,
                                      const char *table, uint32_t item_size,
                                      const char *layout, int timeout_ms);
/* CURVE keys: each 40 characters of Z85 (zmq_curve_keypair's, or
   per-server --curve-keygen's files), NUL-terminated. */
typedef struct per_net_curve {
  const char *server_public; /* the server's public key */
  const char *public_key;    /* this client's public key, which the
                                server's --curve-clients must list */
  const char *secret_key;    /* this client's secret key */
} per_net_curve;
/* per_net_client_open over ZeroMQ's CURVE: the connection is encrypted,
   and the server knows the client by its public key (a server that does
   not list it, or whose public key is another, drops the connection:
   the call then fails as with no server, PER_ERR_IO after timeout_ms,
   c->error adding "(CURVE: ...)"). curve NULL: per_net_client_open. The
   keys are kept in c for its reconnections. Errors: those of
   per_net_client_open; PER_ERR_ARG (a key not 40 characters of Z85, or a
   libzmq built without CURVE: zmq_has("curve") is 0). */
PERDEF per_status per_net_client_open_curve(per_net_client *c,
                                            const char *endpoint,
                                            const char *table,
                                            uint32_t item_size,
                                            const char *layout, int timeout_ms,
                                            const per_net_curve *curve);
/* INSERT n items (n * c->item_size bytes at items) as one trajectory:
   ends (NULL: every step PER_END_NONE) n PER_END_* values, td (NULL: new
   items get the largest priority written so far) n TD errors, each
   item's priority then the one an update would give it. *trajectory
   (may be NULL) gets the trajectory's id. Errors: PER_ERR_NULL (c,
   items), PER_ERR_BATCH (n 0, or a request over max_message), those of
   the server (per_buffer_add_steps / per_buffer_add_td: PER_ERR_ARG for
   an end, PER_ERR_NAN, PER_ERR_INF for a TD error; PER_ERR_BUSY) and
   the others above. The table is unchanged on every one but PER_ERR_IO
   and PER_ERR_FORMAT, after which the request may have been applied. */
PERDEF per_status per_net_client_insert(per_net_client *c, const void *items,
                                        uint32_t n, const uint8_t *ends,
                                        const float *td, uint64_t *trajectory);
/* SAMPLE B units as per_buffer_sample with opts (NULL: whole buffer, with
   replacement, scheduled beta). Outputs (each may be NULL): items_out B *
   s * c->item_size bytes (s = c->seq_len with PER_SAMPLE_SEQUENCES, else
   1; NULL: the items are not asked for, and do not travel), ids B,
   weights B, *beta the beta the weights used, and with
   PER_SAMPLE_SEQUENCES opts->mask (when not NULL) B * s bytes. Errors:
   PER_ERR_NULL (c), PER_ERR_BATCH (B 0), the server's (per_buffer_sample's,
   PER_ERR_BATCH for a reply over its largest message, PER_ERR_BUSY) and
   the others above; nothing written on any. */
PERDEF per_status per_net_client_sample(per_net_client *c, uint32_t B,
                                        const per_sample_opts *opts,
                                        void *items_out, uint64_t *ids,
                                        float *weights, double *beta);
/* UPDATE priorities from TD errors: ids n ids of samples, td n TD errors
   (sequences 0: per_buffer_update) or n * c->seq_len, each sequence's
   steps in order (sequences 1: ids of a sample with
   PER_SAMPLE_SEQUENCES; per_buffer_update_seq). *stale (may be NULL)
   gets how many ids were stale (skipped). Errors: PER_ERR_NULL (c, ids,
   td), PER_ERR_BATCH (n 0, or a request over max_message), PER_ERR_ARG
   (sequences not 0 or 1, or 1 with a table of seq_len 0), the server's
   (PER_ERR_NAN, PER_ERR_INF, PER_ERR_INDEX, ...) and the others above. */
PERDEF per_status per_net_client_update(per_net_client *c, const uint64_t *ids,
                                        const float *td, uint32_t n,
                                        int sequences, uint32_t *stale);
/* The table's sizes and counters (INFO) into *info. Errors: PER_ERR_NULL
   (c, info) and the others above. */
PERDEF per_status per_net_client_info(per_net_client *c, per_net_info *info);
/* Close the socket (requests in flight are dropped) and the context,
   free the client's memory and zero *c. Safe on a zeroed client and on
   NULL. */
PERDEF void per_net_client_close(per_net_client *c);
#endif /* ZMQ_VERSION_MAJOR */

#ifdef __cplusplus
}
#endif

#endif /* PER_NET_H_INCLUDED */

/* ======================================================================
   IMPLEMENTATION
   ====================================================================== */
#if defined(PER_NET_IMPLEMENTATION) && !defined(PER_NET_IMPLEMENTATION_INCLUDED)
#define PER_NET_IMPLEMENTATION_INCLUDED

#ifndef PER_IMPLEMENTATION_INCLUDED
#error \
    "per_net.h: define PER_NET_IMPLEMENTATION in the file that defines PER_IMPLEMENTATION, after including per.h there"
#endif

#include <locale.h>
#include <stdlib.h>
#include <string.h>
#ifndef PER_NO_STDIO
#include <errno.h>
#include <stdio.h>
#endif

/* per.h's casts are C casts; so are these (see per.h). */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>net */

/* A request's fixed header: magic, version, op, request id, name
   length. */
#define PERI_NET_REQ_HEADER 17u

/* Little-endian reads and writes of unaligned bytes. */
static uint64_t peri_net_get(const unsigned char *p, unsigned n) {
  uint64_t v = 0;
  while (n--) v = (v << 8) | p[n];
  return v;
}

static void peri_net_put(unsigned char *p, uint64_t v, unsigned n) {
  unsigned k;
  for (k = 0; k < n; ++k) {
    p[k] = (unsigned char)(v & 0xFFu);
    v >>= 8;
  }
}

static double peri_net_get_f64(const unsigned char *p) {
  uint64_t u = peri_net_get(p, 8);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static void peri_net_put_f64(unsigned char *p, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  peri_net_put(p, u, 8);
}

/* A request being read: the bytes left at p..end. */
typedef struct peri_net_in {
  const unsigned char *p, *end;
} peri_net_in;

static size_t peri_net_left(const peri_net_in *in) {
  return (size_t)(in->end - in->p);
}

/* The next n bytes (n <= 8) as a number; 0 when fewer are left (the
   caller checks the length first). */
static uint64_t peri_net_take(peri_net_in *in, unsigned n) {
  uint64_t v;
  if (peri_net_left(in) < n) return 0;
  v = peri_net_get(in->p, n);
  in->p += n;
  return v;
}

/* s->error for call fn: "fn: " and what follows. */
static peri_msg peri_net_msg(per_net_server *s, const char *fn) {
  peri_msg m = peri_msg_into(s->error, sizeof s->error);
  peri_msg_s(&m, fn);
  peri_msg_s(&m, ": ");
  return m;
}

static per_status peri_net_fail(per_net_server *s, const char *fn,
                                const char *what, per_status st) {
  peri_msg m = peri_net_msg(s, fn);
  peri_msg_s(&m, what);
  return st;
}

/* ---- once-only requests: a ring of the last PER_NET_RECALL applied,
   found by an open-addressed hash of 2 * PER_NET_RECALL slots (linear
   probes; a slot holds a ring position + 1, 0 when empty), so that at
   most half the slots are taken and every probe ends ---- */

typedef char
    peri_net_recall_pow2[(PER_NET_RECALL >= 2u &&
                          PER_NET_RECALL <= (1u << 30) &&
                          (PER_NET_RECALL & (PER_NET_RECALL - 1u)) == 0u)
                             ? 1
                             : -1];

/* A once-only request applied: its id and op, and its reply's words
   (INSERT: the trajectory id and the size after; UPDATE: 0 and the stale
   count). */
struct peri_net_seen {
  uint64_t id, a;
  uint32_t b, op;
};

#define PERI_NET_SLOTS (2u * (uint32_t)PER_NET_RECALL)

static uint32_t peri_net_home(uint64_t id) {
  return (uint32_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 32) &
         (PERI_NET_SLOTS - 1u);
}

static void peri_net_forget(per_net_server *s, per_net_table *t) {
  if (t->seen) PER_FREE(t->seen, s->alloc_ctx);
  if (t->seen_slots) PER_FREE(t->seen_slots, s->alloc_ctx);
  t->seen = NULL;
  t->seen_slots = NULL;
  t->seen_count = 0;
}

/* t's memory of once-only requests, allocated at its first: 0 when it
   cannot be (nothing changed). */
static int peri_net_recall_ready(per_net_server *s, per_net_table *t) {
  if (t->seen) return 1;
  t->seen = (struct peri_net_seen *)PER_MALLOC(
      (size_t)PER_NET_RECALL * sizeof *t->seen, s->alloc_ctx);
  t->seen_slots = (uint32_t *)PER_MALLOC(
      (size_t)PERI_NET_SLOTS * sizeof *t->seen_slots, s->alloc_ctx);
  if (!t->seen || !t->seen_slots) {
    peri_net_forget(s, t);
    return 0;
  }
  memset(t->seen_slots, 0, (size_t)PERI_NET_SLOTS * sizeof *t->seen_slots);
  t->seen_count = 0;
  return 1;
}

/* The slot that holds id, or the empty slot where its probe ends. */
static uint32_t peri_net_probe(const per_net_table *t, uint64_t id) {
  uint32_t i = peri_net_home(id);
  while (t->seen_slots[i] && t->seen[t->seen_slots[i] - 1u].id != id)
    i = (i + 1u) & (PERI_NET_SLOTS - 1u);
  return i;
}

/* The once-only request of id that t applied, or NULL. */
static const struct peri_net_seen *peri_net_recall(const per_net_table *t,
                                                   uint64_t id) {
  uint32_t i;
  if (!t->seen) return NULL;
  i = peri_net_probe(t, id);
  return t->seen_slots[i] ? &t->seen[t->seen_slots[i] - 1u] : NULL;
}

/* Remember an applied once-only request (id not remembered; t->seen
   allocated), forgetting the oldest when PER_NET_RECALL are. */
static void peri_net_remember(per_net_table *t, uint64_t id, uint32_t op,
                              uint64_t a, uint32_t b) {
  const uint32_t mask = PERI_NET_SLOTS - 1u;
  uint32_t p = (uint32_t)(t->seen_count % PER_NET_RECALL), i, j;
  if (t->seen_count >= PER_NET_RECALL) {
    /* the oldest leaves its slot; the entries after it in its run move
       back when their home is not between the hole and them */
    i = peri_net_probe(t, t->seen[p].id);
    for (j = i;;) {
      uint32_t h;
      j = (j + 1u) & mask;
      if (!t->seen_slots[j]) break;
      h = peri_net_home(t->seen[t->seen_slots[j] - 1u].id);
      if (((j - h) & mask) >= ((j - i) & mask)) {
        t->seen_slots[i] = t->seen_slots[j];
        i = j;
      }
    }
    t->seen_slots[i] = 0;
  }
  t->seen[p].id = id;
  t->seen[p].a = a;
  t->seen[p].b = b;
  t->seen[p].op = op;
  t->seen_slots[peri_net_probe(t, id)] = p + 1u;
  t->seen_count++;
}

PERDEF per_status per_net_init(per_net_server *s, uint64_t max_message,
                               void *alloc_ctx) {
  if (!s) return PER_ERR_NULL;
  memset(s, 0, sizeof *s);
  if (max_message < PER_NET_MIN_MESSAGE ||
      max_message > (uint64_t)(SIZE_MAX / 2)) {
    peri_msg m = peri_net_msg(s, "per_net_init");
    peri_msg_nu(&m, "max_message", max_message);
    peri_msg_s(&m, " is outside [4096, SIZE_MAX / 2]");
    return PER_ERR_ARG;
  }
  s->max_message = max_message;
  s->alloc_ctx = alloc_ctx;
  return PER_OK;
}

PERDEF void per_net_free(per_net_server *s) {
  uint32_t k;
  if (!s) return;
  for (k = 0; k < s->ntables; ++k) {
    peri_net_forget(s, s->tables[k]);
    per_buffer_free(&s->tables[k]->buf);
    PER_FREE(s->tables[k], s->alloc_ctx);
  }
  if (s->tables) PER_FREE(s->tables, s->alloc_ctx);
  if (s->out) PER_FREE(s->out, s->alloc_ctx);
  if (s->scratch) PER_FREE(s->scratch, s->alloc_ctx);
  memset(s, 0, sizeof *s);
}

PERDEF per_net_table *per_net_find(const per_net_server *s, const char *name,
                                   size_t len) {
  uint32_t k;
  if (!s || !name || len == 0 || len >= PER_NET_NAME_MAX) return NULL;
  for (k = 0; k < s->ntables; ++k) {
    const char *n = s->tables[k]->name;
    if (strlen(n) == len && memcmp(n, name, len) == 0) return s->tables[k];
  }
  return NULL;
}

/* PER_OK when name (len bytes) may name a table: 1 .. 63 bytes, none a
   control character. */
static int peri_net_name_ok(const char *name, size_t len) {
  size_t k;
  if (len == 0 || len >= PER_NET_NAME_MAX) return 0;
  for (k = 0; k < len; ++k)
    if ((unsigned char)name[k] < 0x20u || name[k] == 0x7F) return 0;
  return 1;
}

PERDEF per_status per_net_add_table(per_net_server *s, const char *name,
                                    const per_config *cfg, const char *layout) {
  static const char fn[] = "per_net_add_table";
  per_net_table *t, **grown;
  per_status st;
  size_t len;
  if (!s) return PER_ERR_NULL;
  if (!name || !cfg)
    return peri_net_fail(s, fn, "name or cfg is NULL", PER_ERR_NULL);
  len = strlen(name);
  if (!peri_net_name_ok(name, len)) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "a table's name is 1 to 63 bytes without control "
                   "characters, not one of ");
    peri_msg_u(&m, len);
    peri_msg_s(&m, " bytes");
    return PER_ERR_ARG;
  }
  if (per_net_find(s, name, len)) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "a table named \"");
    peri_msg_s(&m, name);
    peri_msg_s(&m, "\" exists");
    return PER_ERR_ARG;
  }
  if (layout && strlen(layout) >= PER_LAYOUT_MAX) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "the layout has ");
    peri_msg_u(&m, strlen(layout));
    peri_msg_s(&m, " chars, more than 511");
    return PER_ERR_ARG;
  }
  t = (per_net_table *)PER_MALLOC(sizeof *t, s->alloc_ctx);
  grown = (per_net_table **)PER_MALLOC((s->ntables + 1u) * sizeof *grown,
                                       s->alloc_ctx);
  if (!t || !grown) {
    if (t) PER_FREE(t, s->alloc_ctx);
    if (grown) PER_FREE(grown, s->alloc_ctx);
    return peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
  }
  memset(t, 0, sizeof *t);
  memcpy(t->name, name, len + 1);
  st = per_buffer_init(&t->buf, cfg, s->alloc_ctx);
  if (st == PER_OK) st = per_buffer_set_layout(&t->buf, layout ? layout : "");
  if (st != PER_OK) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "table \"");
    peri_msg_s(&m, name);
    peri_msg_s(&m, "\": ");
    peri_msg_s(&m, t->buf.error[0] ? t->buf.error : per_status_str(st));
    per_buffer_free(&t->buf);
    PER_FREE(t, s->alloc_ctx);
    PER_FREE(grown, s->alloc_ctx);
    return st;
  }
  if (s->ntables) memcpy(grown, s->tables, s->ntables * sizeof *grown);
  if (s->tables) PER_FREE(s->tables, s->alloc_ctx);
  grown[s->ntables] = t;
  s->tables = grown;
  s->ntables++;
  s->error[0] = 0;
  return PER_OK;
}

PERDEF per_status per_net_set_limiter(per_net_server *s, per_net_table *t,
                                      uint64_t min_size,
                                      double samples_per_insert,
                                      double error_margin) {
  static const char fn[] = "per_net_set_limiter";
  peri_msg m;
  if (!s) return PER_ERR_NULL;
  if (!t) return peri_net_fail(s, fn, "t is NULL", PER_ERR_NULL);
  m = peri_net_msg(s, fn);
  peri_msg_s(&m, "table \"");
  peri_msg_s(&m, t->name);
  peri_msg_s(&m, "\": ");
  if (min_size > t->buf.cfg.capacity) {
    peri_msg_nu(&m, "min_size", min_size);
    peri_msg_nu(&m, " is above the capacity,", t->buf.cfg.capacity);
    return PER_ERR_ARG;
  }
  if (peri_check_real(&m, "samples_per_insert", samples_per_insert, 0) ||
      peri_check_real(&m, "error_margin", error_margin, 0))
    return PER_ERR_ARG;
  t->min_size = min_size;
  t->samples_per_insert = samples_per_insert;
  t->error_margin = error_margin;
  s->error[0] = 0;
  return PER_OK;
}

#ifndef PER_NO_STDIO
PERDEF per_status per_net_load(per_net_server *s, per_net_table *t,
                               const char *path) {
  per_status st;
  double out;
  if (!s) return PER_ERR_NULL;
  if (!t || !path)
    return peri_net_fail(s, "per_net_load", "t or path is NULL", PER_ERR_NULL);
  st = per_buffer_load(&t->buf, path);
  if (st != PER_OK) {
    peri_msg m = peri_net_msg(s, "per_net_load");
    peri_msg_s(&m, "table \"");
    peri_msg_s(&m, t->name);
    peri_msg_s(&m, "\": ");
    peri_msg_s(&m, t->buf.error[0] ? t->buf.error : per_status_str(st));
    return st;
  }
  /* d = in * spi - out = spi * min_size: out = spi * (in - min_size) */
  t->items_in = t->buf.size;
  out = t->samples_per_insert * ((double)t->items_in - (double)t->min_size);
  t->items_out = out > 0 ? (uint64_t)out : 0u;
  s->error[0] = 0;
  return PER_OK;
}

/* ---- checkpoints of the whole server ----
   dir/server.state: "PERNETST", u32 version 1, u32 tables, u64
   generation, u64 the file's bytes (CRC included); then each table's
   record: u8 name length k, k bytes of name, u64 inserts, samples,
   updates, refused, items_in, items_out, busy, repeats, u32 n once-only
   requests remembered, u32 0, and n of them oldest first (u64 id, u64 a,
   u32 b, u32 op); then the CRC-32C (per_file_write's). Little-endian. */

#define PERI_NET_STATE_HEAD 32u
#define PERI_NET_STATE_REC 72u /* a record but its name and requests */
#define PERI_NET_SEEN_BYTES 24u

/* A state file read whole and checked. */
typedef struct peri_net_state {
  unsigned char *mem;
  size_t len;
  uint64_t gen;
  uint32_t ntables;
} peri_net_state;

/* Room for a path in dir: strlen(dir) + 64 bytes. */
#define PERI_NET_PATH_ROOM(dir) (strlen(dir) + 64u)

/* dir/table-K.G.per into p (PERI_NET_PATH_ROOM(dir) bytes). */
static void peri_net_name(char *p, const char *dir, uint32_t k, uint64_t gen) {
  snprintf(p, PERI_NET_PATH_ROOM(dir), "%s/table-%lu.%llu.per", dir,
           (unsigned long)k, (unsigned long long)gen);
}

/* dir/table-K.G.per, or (state) dir/server.state, in PER_MALLOC's memory
   the caller frees; NULL when out of memory. */
static char *peri_net_path(per_net_server *s, const char *dir, uint32_t k,
                           uint64_t gen, int state) {
  char *p = (char *)PER_MALLOC(PERI_NET_PATH_ROOM(dir), s->alloc_ctx);
  if (!p) return NULL;
  if (state)
    snprintf(p, PERI_NET_PATH_ROOM(dir), "%s/%s", dir, PER_NET_STATE_FILE);
  else peri_net_name(p, dir, k, gen);
  return p;
}

/* The next table record at in (checked to lie within it): name, counters,
   remembered requests; 0 when it does not fit or is out of range. */
static int peri_net_state_rec(peri_net_in *in, const unsigned char **name,
                              uint32_t *k, const unsigned char **words,
                              uint32_t *nseen, const unsigned char **seen) {
  uint32_t j;
  if (peri_net_left(in) < 1) return 0;
  *k = in->p[0];
  *name = in->p + 1;
  if (peri_net_left(in) < 1u + *k + PERI_NET_STATE_REC ||
      !peri_net_name_ok((const char *)*name, *k))
    return 0;
  in->p += 1u + *k;
  *words = in->p;
  in->p += 64;
  *nseen = (uint32_t)peri_net_take(in, 4);
  if (peri_net_take(in, 4) != 0 ||
      peri_net_left(in) / PERI_NET_SEEN_BYTES < *nseen)
    return 0;
  *seen = in->p;
  for (j = 0; j < *nseen; ++j) {
    uint32_t op = (uint32_t)peri_net_get(in->p + 24u * j + 20u, 4);
    if (!(peri_net_get(in->p + 24u * j, 8) & PER_NET_ONCE) ||
        (op != PER_NET_INSERT && op != PER_NET_UPDATE))
      return 0;
  }
  in->p += (size_t)*nseen * PERI_NET_SEEN_BYTES;
  return 1;
}

/* Read dir's state file whole into *st and check it (its CRC and every
   record's bounds). *absent: 1 when there is no such file. */
static per_status peri_net_state_read(per_net_server *s, const char *fn,
                                      const char *path, peri_net_state *st,
                                      int *absent) {
  unsigned char head[PERI_NET_STATE_HEAD];
  per_status r = PER_OK;
  uint64_t total = 0;
  size_t got;
  FILE *f;
  memset(st, 0, sizeof *st);
  *absent = 0;
  errno = 0;
  f = fopen(path, "rb");
  if (!f) {
    peri_msg m = peri_net_msg(s, fn);
    *absent = errno == ENOENT;
    peri_msg_s(&m, path);
    peri_msg_s(&m, ": cannot be opened");
    if (errno) {
      peri_msg_s(&m, ": ");
      peri_msg_s(&m, strerror(errno));
    }
    return PER_ERR_IO;
  }
  got = fread(head, 1, sizeof head, f);
  if (ferror(f)) r = PER_ERR_IO;
  else if (got < 8 || memcmp(head, "PERNETST", 8) != 0) r = PER_ERR_FORMAT;
  else if (got < sizeof head) r = PER_ERR_TRUNCATED;
  else if (peri_net_get(head + 8, 4) != 1u) r = PER_ERR_VERSION;
  if (r == PER_OK) {
    total = peri_net_get(head + 24, 8);
    if (total < PERI_NET_STATE_HEAD + 4u || total > (UINT64_C(1) << 31))
      r = PER_ERR_CORRUPT;
  }
  if (r == PER_OK) {
    st->mem = (unsigned char *)PER_MALLOC((size_t)total, s->alloc_ctx);
    if (!st->mem) r = PER_ERR_NOMEM;
  }
  if (r == PER_OK) {
    st->len = (size_t)total;
    memcpy(st->mem, head, sizeof head);
    got = fread(st->mem + sizeof head, 1, st->len - sizeof head, f);
    if (ferror(f)) r = PER_ERR_IO;
    else if (got < st->len - sizeof head) r = PER_ERR_TRUNCATED;
    else if (fgetc(f) != EOF) r = PER_ERR_CORRUPT;
    else if (per_crc32c(0, st->mem, st->len - 4) !=
             (uint32_t)peri_net_get(st->mem + st->len - 4, 4))
      r = PER_ERR_CHECKSUM;
  }
  fclose(f);
  if (r == PER_OK) { /* every record within the file, nothing after */
    peri_net_in in;
    uint32_t j, k, nseen;
    const unsigned char *name, *words, *seen;
    st->ntables = (uint32_t)peri_net_get(head + 12, 4);
    st->gen = peri_net_get(head + 16, 8);
    in.p = st->mem + PERI_NET_STATE_HEAD;
    in.end = st->mem + st->len - 4;
    for (j = 0; j < st->ntables && r == PER_OK; ++j)
      if (!peri_net_state_rec(&in, &name, &k, &words, &nseen, &seen))
        r = PER_ERR_CORRUPT;
    if (r == PER_OK && (in.p != in.end || st->gen == 0)) r = PER_ERR_CORRUPT;
  }
  if (r != PER_OK) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, path);
    peri_msg_s(&m, ": ");
    peri_msg_s(&m, r == PER_ERR_FORMAT ? "not a per_net_save state file"
                                       : per_status_str(r));
    if (st->mem) PER_FREE(st->mem, s->alloc_ctx);
    memset(st, 0, sizeof *st);
  }
  return r;
}

PERDEF per_status per_net_save(per_net_server *s, const char *dir) {
  static const char fn[] = "per_net_save";
  peri_net_state prev;
  per_status st = PER_OK;
  unsigned char *mem, *o;
  char *path, *file;
  uint64_t gen, total = PERI_NET_STATE_HEAD + 4u;
  uint32_t k;
  int absent;
  if (!s) return PER_ERR_NULL;
  if (!dir) return peri_net_fail(s, fn, "dir is NULL", PER_ERR_NULL);
  path = peri_net_path(s, dir, 0, 0, 1);
  file = path ? peri_net_path(s, dir, 0, 0, 1) : NULL; /* reused */
  if (!file) {
    if (path) PER_FREE(path, s->alloc_ctx);
    return peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
  }
  /* the previous generation, whose files go once this one is in place.
     A damaged state file is overwritten (its checkpoint is lost already);
     one that cannot be read now (memory, I/O) refuses the save, since
     this generation's files could be the ones it names. */
  st = peri_net_state_read(s, fn, path, &prev, &absent);
  if (st == PER_ERR_NOMEM || (st == PER_ERR_IO && !absent)) {
    PER_FREE(path, s->alloc_ctx);
    PER_FREE(file, s->alloc_ctx);
    return st;
  }
  st = PER_OK;
  gen = (prev.gen > s->generation ? prev.gen : s->generation) + 1u;
  for (k = 0; k < s->ntables; ++k) {
    const per_net_table *t = s->tables[k];
    uint64_t n =
        t->seen_count < PER_NET_RECALL ? t->seen_count : PER_NET_RECALL;
    total +=
        1u + strlen(t->name) + PERI_NET_STATE_REC + n * PERI_NET_SEEN_BYTES;
  }
  mem = total <= (UINT64_C(1) << 31)
            ? (unsigned char *)PER_MALLOC((size_t)total, s->alloc_ctx)
            : NULL;
  if (!mem) st = peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
  for (k = 0; k < s->ntables && st == PER_OK; ++k) {
    peri_net_name(file, dir, k, gen);
    st = per_buffer_save(&s->tables[k]->buf, file);
    if (st != PER_OK) {
      peri_msg m = peri_net_msg(s, fn);
      peri_msg_s(&m, file);
      peri_msg_s(&m, ": ");
      peri_msg_s(&m, per_status_str(st));
      peri_msg_s(&m, " (does the directory exist?)");
    }
  }
  if (st == PER_OK) {
    memcpy(mem, "PERNETST", 8);
    peri_net_put(mem + 8, 1, 4);
    peri_net_put(mem + 12, s->ntables, 4);
    peri_net_put(mem + 16, gen, 8);
    peri_net_put(mem + 24, total, 8);
    o = mem + PERI_NET_STATE_HEAD;
    for (k = 0; k < s->ntables; ++k) {
      const per_net_table *t = s->tables[k];
      size_t len = strlen(t->name);
      uint64_t n =
          t->seen_count < PER_NET_RECALL ? t->seen_count : PER_NET_RECALL;
      uint64_t j, w[8];
      unsigned q;
      w[0] = t->inserts;
      w[1] = t->samples;
      w[2] = t->updates;
      w[3] = t->refused;
      w[4] = t->items_in;
      w[5] = t->items_out;
      w[6] = t->busy;
      w[7] = t->repeats;
      *o++ = (unsigned char)len;
      memcpy(o, t->name, len);
      o += len;
      for (q = 0; q < 8; ++q, o += 8) peri_net_put(o, w[q], 8);
      peri_net_put(o, n, 4);
      peri_net_put(o + 4, 0, 4);
      o += 8;
      for (j = 0; j < n; ++j, o += PERI_NET_SEEN_BYTES) { /* oldest first */
        const struct peri_net_seen *e =
            &t->seen[(t->seen_count - n + j) % PER_NET_RECALL];
        peri_net_put(o, e->id, 8);
        peri_net_put(o + 8, e->a, 8);
        peri_net_put(o + 16, e->b, 4);
        peri_net_put(o + 20, e->op, 4);
      }
    }
    st = per_file_write(mem, (size_t)total - 4u, path, s->alloc_ctx);
    if (st != PER_OK) {
      peri_msg m = peri_net_msg(s, fn);
      peri_msg_s(&m, path);
      peri_msg_s(&m, ": ");
      peri_msg_s(&m, per_status_str(st));
    }
  }
  if (st == PER_OK) {
    /* the generation the file named and the one s saved last, when a
       damaged state file hid that one */
    uint64_t olds[2];
    uint32_t counts[2], q;
    olds[0] = prev.gen;
    counts[0] = prev.ntables;
    olds[1] = s->generation != prev.gen ? s->generation : 0u;
    counts[1] = s->ntables;
    for (q = 0; q < 2; ++q)
      for (k = 0; olds[q] && olds[q] != gen && k < counts[q]; ++k) {
        peri_net_name(file, dir, k, olds[q]);
        remove(file);
      }
    s->generation = gen;
    s->error[0] = 0;
  }
  if (mem) PER_FREE(mem, s->alloc_ctx);
  if (prev.mem) PER_FREE(prev.mem, s->alloc_ctx);
  PER_FREE(path, s->alloc_ctx);
  PER_FREE(file, s->alloc_ctx);
  return st;
}

PERDEF per_status per_net_restore(per_net_server *s, const char *dir) {
  static const char fn[] = "per_net_restore";
  peri_net_state sf;
  per_status st;
  peri_net_in in;
  char *path;
  struct peri_net_seen **mem = NULL;
  uint32_t **slots = NULL;
  unsigned char *taken = NULL; /* a server table's record was found */
  uint32_t j, k, nseen, len;
  const unsigned char *name, *words, *seen;
  int absent;
  if (!s) return PER_ERR_NULL;
  if (!dir) return peri_net_fail(s, fn, "dir is NULL", PER_ERR_NULL);
  path = peri_net_path(s, dir, 0, 0, 1);
  if (!path) return peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
  st = peri_net_state_read(s, fn, path, &sf, &absent);
  PER_FREE(path, s->alloc_ctx);
  if (st != PER_OK) return st;
  if (sf.ntables != s->ntables) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, dir);
    peri_msg_nu(&m, ": the checkpoint has", sf.ntables);
    peri_msg_nu(&m, " tables, the server", s->ntables);
    st = PER_ERR_MISMATCH;
  }
  if (st == PER_OK && s->ntables) {
    mem = (struct peri_net_seen **)PER_MALLOC(s->ntables * sizeof *mem,
                                              s->alloc_ctx);
    slots = (uint32_t **)PER_MALLOC(s->ntables * sizeof *slots, s->alloc_ctx);
    taken = (unsigned char *)PER_MALLOC(s->ntables, s->alloc_ctx);
    if (mem) memset(mem, 0, s->ntables * sizeof *mem);
    if (slots) memset(slots, 0, s->ntables * sizeof *slots);
    if (taken) memset(taken, 0, s->ntables);
    if (!mem || !slots || !taken)
      st = peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
  }
  /* each server table's record (by name) and file, checked */
  in.p = sf.mem + PERI_NET_STATE_HEAD;
  in.end = sf.mem + sf.len - 4;
  for (j = 0; j < sf.ntables && st == PER_OK; ++j) {
    const per_net_table *t;
    per_ckpt_info info;
    char *file;
    peri_net_state_rec(&in, &name, &len, &words, &nseen, &seen);
    t = per_net_find(s, (const char *)name, len);
    for (k = 0; t && s->tables[k] != t; ++k) continue;
    if (!t || taken[k]) {
      peri_msg m = peri_net_msg(s, fn);
      char nm[PER_NET_NAME_MAX];
      memcpy(nm, name, len);
      nm[len] = 0;
      peri_msg_s(&m, dir);
      peri_msg_s(&m, ": the checkpoint's table \"");
      peri_msg_s(&m, nm);
      peri_msg_s(&m, t ? "\" comes twice" : "\" is not the server's");
      st = PER_ERR_MISMATCH;
      break;
    }
    taken[k] = 1;
    file = peri_net_path(s, dir, j, sf.gen, 0);
    if (!file) {
      st = peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
      break;
    }
    st = per_ckpt_read_info(file, &info);
    if (st == PER_OK && (info.cfg.capacity != t->buf.cfg.capacity ||
                         info.cfg.item_size != t->buf.cfg.item_size))
      st = PER_ERR_MISMATCH;
    if (st != PER_OK) {
      peri_msg m = peri_net_msg(s, fn);
      peri_msg_s(&m, file);
      peri_msg_s(&m, ": ");
      if (st == PER_ERR_MISMATCH) {
        peri_msg_nu(&m, "capacity", info.cfg.capacity);
        peri_msg_nu(&m, ", item size", info.cfg.item_size);
        peri_msg_s(&m, "; table \"");
        peri_msg_s(&m, t->name);
        peri_msg_nu(&m, "\" has capacity", t->buf.cfg.capacity);
        peri_msg_nu(&m, ", item size", t->buf.cfg.item_size);
      } else {
        peri_msg_s(&m, per_status_str(st));
      }
    }
    PER_FREE(file, s->alloc_ctx);
    if (st == PER_OK && nseen) {
      mem[k] = (struct peri_net_seen *)PER_MALLOC(
          (size_t)PER_NET_RECALL * sizeof **mem, s->alloc_ctx);
      slots[k] = (uint32_t *)PER_MALLOC((size_t)PERI_NET_SLOTS * sizeof **slots,
                                        s->alloc_ctx);
      if (!mem[k] || !slots[k])
        st = peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    }
  }
  /* then each table, in the file's order: its buffer, counters and
     requests remembered */
  in.p = sf.mem + PERI_NET_STATE_HEAD;
  for (j = 0; j < sf.ntables && st == PER_OK; ++j) {
    per_net_table *t;
    char *file;
    uint32_t q, first;
    peri_net_state_rec(&in, &name, &len, &words, &nseen, &seen);
    t = per_net_find(s, (const char *)name, len);
    for (k = 0; s->tables[k] != t; ++k) continue;
    file = peri_net_path(s, dir, j, sf.gen, 0);
    if (!file) {
      st = peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
      break;
    }
    st = per_buffer_load(&t->buf, file);
    if (st != PER_OK) {
      peri_msg m = peri_net_msg(s, fn);
      peri_msg_s(&m, file);
      peri_msg_s(&m, ": ");
      peri_msg_s(&m, t->buf.error[0] ? t->buf.error : per_status_str(st));
      PER_FREE(file, s->alloc_ctx);
      break;
    }
    PER_FREE(file, s->alloc_ctx);
    t->inserts = peri_net_get(words, 8);
    t->samples = peri_net_get(words + 8, 8);
    t->updates = peri_net_get(words + 16, 8);
    t->refused = peri_net_get(words + 24, 8);
    t->items_in = peri_net_get(words + 32, 8);
    t->items_out = peri_net_get(words + 40, 8);
    t->busy = peri_net_get(words + 48, 8);
    t->repeats = peri_net_get(words + 56, 8);
    peri_net_forget(s, t);
    if (mem[k]) {
      t->seen = mem[k];
      t->seen_slots = slots[k];
      mem[k] = NULL;
      slots[k] = NULL;
      memset(t->seen_slots, 0, (size_t)PERI_NET_SLOTS * sizeof *t->seen_slots);
      first = nseen > PER_NET_RECALL ? nseen - PER_NET_RECALL : 0u;
      for (q = first; q < nseen; ++q) { /* the newest, a repeat once */
        const unsigned char *e = seen + (size_t)q * PERI_NET_SEEN_BYTES;
        uint64_t id = peri_net_get(e, 8);
        if (!peri_net_recall(t, id))
          peri_net_remember(t, id, (uint32_t)peri_net_get(e + 20, 4),
                            peri_net_get(e + 8, 8),
                            (uint32_t)peri_net_get(e + 16, 4));
      }
    }
  }
  if (st == PER_OK) {
    s->generation = sf.gen;
    s->error[0] = 0;
  }
  for (k = 0; k < s->ntables && mem && slots; ++k) {
    if (mem[k]) PER_FREE(mem[k], s->alloc_ctx);
    if (slots[k]) PER_FREE(slots[k], s->alloc_ctx);
  }
  if (mem) PER_FREE(mem, s->alloc_ctx);
  if (slots) PER_FREE(slots, s->alloc_ctx);
  if (taken) PER_FREE(taken, s->alloc_ctx);
  PER_FREE(sf.mem, s->alloc_ctx);
  return st;
}

#endif

/* ---- the rate limiter ---- */

/* d = items_in * samples_per_insert - items_out (docs/PROTOCOL.md) */
static double peri_net_ahead(const per_net_table *t) {
  return (double)t->items_in * t->samples_per_insert - (double)t->items_out;
}

/* PER_ERR_BUSY (s->error says why) when t's limiter holds back a sample
   (sample != 0) or an insert; else PER_OK. */
static per_status peri_net_limit(per_net_server *s, per_net_table *t,
                                 int sample) {
  double spi = t->samples_per_insert, d = peri_net_ahead(t);
  double mid = spi * (double)t->min_size;
  peri_msg m;
  if (sample && t->buf.size < t->min_size) {
    m = peri_net_msg(s, "sample");
    peri_msg_s(&m, "busy: table \"");
    peri_msg_s(&m, t->name);
    peri_msg_nu(&m, "\" holds", t->buf.size);
    peri_msg_nu(&m, " items, fewer than min_size", t->min_size);
    return PER_ERR_BUSY;
  }
  if (spi > 0 &&
      (sample ? d < mid - t->error_margin : d > mid + t->error_margin)) {
    m = peri_net_msg(s, sample ? "sample" : "insert");
    peri_msg_s(&m, "busy: table \"");
    peri_msg_s(&m, t->name);
    peri_msg_s(&m, sample ? "\": sampling is ahead of inserting ("
                          : "\": inserting is ahead of sampling (");
    peri_msg_nu(&m, "items inserted", t->items_in);
    peri_msg_nu(&m, ", sampled", t->items_out);
    peri_msg_s(&m, ")");
    return PER_ERR_BUSY;
  }
  return PER_OK;
}

/* ---- spec texts ---- */

/* One table of a spec being read: its config and which keys were set. */
typedef struct peri_net_spec {
  char name[PER_NET_NAME_MAX];
  char layout[PER_LAYOUT_MAX];
  per_config cfg;
  uint32_t set; /* bit k: key k of peri_net_keys was given */
  uint32_t line;
  uint64_t min_size;  /* the rate limiter's (per_net_set_limiter) */
  double spi, margin; /* samples_per_insert, error_margin */
} peri_net_spec;

static const char *const peri_net_keys[] = {"capacity",
                                            "item_size",
                                            "alpha",
                                            "beta0",
                                            "beta1",
                                            "beta_steps",
                                            "eps",
                                            "max_priority",
                                            "seed",
                                            "flags",
                                            "max_unique",
                                            "seq_len",
                                            "seq_stride",
                                            "seq_eta",
                                            "layout",
                                            "min_size",
                                            "samples_per_insert",
                                            "error_margin"};
#define PERI_NET_NKEYS (sizeof peri_net_keys / sizeof peri_net_keys[0])

static int peri_net_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The line's number in a message: "line N: " */
static peri_msg peri_net_line_msg(per_net_server *s, uint32_t line) {
  peri_msg m = peri_net_msg(s, "per_net_add_spec");
  peri_msg_nu(&m, "line", line);
  peri_msg_s(&m, ": ");
  return m;
}

/* An unsigned decimal of the whole value v (n bytes), at most max. */
static int peri_net_parse_u(const char *v, size_t n, uint64_t max,
                            uint64_t *out) {
  uint64_t x = 0;
  size_t k;
  if (n == 0 || n > 20) return 0;
  for (k = 0; k < n; ++k) {
    unsigned d = (unsigned)(unsigned char)v[k] - (unsigned)'0';
    if (d > 9u || x > (UINT64_MAX - d) / 10u) return 0;
    x = x * 10u + d;
  }
  if (x > max) return 0;
  *out = x;
  return 1;
}

/* A real: the whole value as strtod reads it in the C locale (a '.'
   for the decimal point whatever the locale says: it becomes the
   locale's before strtod reads it, and a locale's own is refused). */
static int peri_net_parse_d(const char *v, size_t n, double *out) {
  char tmp[64], *end = NULL;
  const char *point = localeconv()->decimal_point;
  size_t k;
  if (n == 0 || n >= sizeof tmp || !point || strlen(point) != 1) return 0;
  memcpy(tmp, v, n);
  tmp[n] = 0;
  for (k = 0; k < n; ++k)
    if (tmp[k] == point[0] && point[0] != '.') return 0;
    else if (tmp[k] == '.') tmp[k] = point[0];
  *out = strtod(tmp, &end);
  return end == tmp + n;
}

/* Config flags: a number, or names joined by |. */
static int peri_net_parse_flags(const char *v, size_t n, uint32_t *out) {
  static const char *const names[] = {"weights_buffer_max",
                                      "seq_cross_episodes", "max_live"};
  static const uint32_t bits[] = {PER_WEIGHTS_BUFFER_MAX,
                                  PER_SEQ_CROSS_EPISODES, PER_MAX_LIVE};
  uint64_t x;
  uint32_t f = 0;
  size_t a = 0;
  if (peri_net_parse_u(v, n, UINT32_MAX, &x)) {
    *out = (uint32_t)x;
    return 1;
  }
  if (n == 0 || v[n - 1] == '|') return 0;
  while (a < n) {
    size_t b = a, e, k;
    int found = 0;
    while (b < n && v[b] != '|') ++b;
    e = b;
    while (a < e && peri_net_blank(v[a])) ++a;
    while (e > a && peri_net_blank(v[e - 1])) --e;
    for (k = 0; k < 3; ++k)
      if (strlen(names[k]) == e - a && memcmp(names[k], v + a, e - a) == 0) {
        f |= bits[k];
        found = 1;
      }
    if (!found) return 0;
    a = b + 1;
  }
  *out = f;
  return 1;
}

/* Key k of t set from the value v (n bytes). */
static int peri_net_set_key(peri_net_spec *t, unsigned k, const char *v,
                            size_t n) {
  per_config *c = &t->cfg;
  uint64_t u = 0;
  double d = 0;
  switch (k) {
    case 0:
    case 1:
    case 10:
    case 11:
    case 12:
      if (!peri_net_parse_u(v, n, UINT32_MAX, &u)) return 0;
      if (k == 0) c->capacity = (uint32_t)u;
      else if (k == 1) c->item_size = (uint32_t)u;
      else if (k == 10) c->max_unique = (uint32_t)u;
      else if (k == 11) c->seq_len = (uint32_t)u;
      else c->seq_stride = (uint32_t)u;
      return 1;
    case 5:
    case 8:
      if (!peri_net_parse_u(v, n, UINT64_MAX, &u)) return 0;
      if (k == 5) c->beta_steps = u;
      else c->seed = u;
      return 1;
    case 9: return peri_net_parse_flags(v, n, &c->flags);
    case 15: return peri_net_parse_u(v, n, UINT64_MAX, &t->min_size);
    case 16: return peri_net_parse_d(v, n, &t->spi);
    case 17: return peri_net_parse_d(v, n, &t->margin);
    case 14:
      if (n >= PER_LAYOUT_MAX) return 0;
      memcpy(t->layout, v, n);
      t->layout[n] = 0;
      return 1;
    default:
      if (!peri_net_parse_d(v, n, &d)) return 0;
      if (k == 2) c->alpha = d;
      else if (k == 3) c->beta0 = d;
      else if (k == 4) c->beta1 = d;
      else if (k == 6) c->eps = d;
      else if (k == 7) c->max_priority = d;
      else c->seq_eta = d;
      return 1;
  }
}

/* The defaults for t's capacity and item_size under the keys given. */
static void peri_net_spec_defaults(peri_net_spec *t) {
  per_config given = t->cfg,
             d = per_config_default(given.capacity, given.item_size);
  uint32_t k = 0;
  for (k = 2; k < 14; ++k) {
    if (!(t->set & (1u << k))) continue;
    switch (k) {
      case 2: d.alpha = given.alpha; break;
      case 3: d.beta0 = given.beta0; break;
      case 4: d.beta1 = given.beta1; break;
      case 5: d.beta_steps = given.beta_steps; break;
      case 6: d.eps = given.eps; break;
      case 7: d.max_priority = given.max_priority; break;
      case 8: d.seed = given.seed; break;
      case 9: d.flags = given.flags; break;
      case 10: d.max_unique = given.max_unique; break;
      case 11: d.seq_len = given.seq_len; break;
      case 12: d.seq_stride = given.seq_stride; break;
      default: d.seq_eta = given.seq_eta; break;
    }
  }
  t->cfg = d;
}

/* Drop the tables added after the first `keep`. */
static void peri_net_drop_tables(per_net_server *s, uint32_t keep) {
  while (s->ntables > keep) {
    per_net_table *t = s->tables[--s->ntables];
    peri_net_forget(s, t);
    per_buffer_free(&t->buf);
    PER_FREE(t, s->alloc_ctx);
  }
}

/* Add the table t read from the spec; s->error names its line on error. */
static per_status peri_net_spec_add(per_net_server *s, peri_net_spec *t) {
  per_status st;
  if ((t->set & 3u) != 3u) {
    peri_msg m = peri_net_line_msg(s, t->line);
    peri_msg_s(&m, "table \"");
    peri_msg_s(&m, t->name);
    peri_msg_s(&m, "\" has no ");
    peri_msg_s(&m, (t->set & 1u) ? "item_size" : "capacity");
    return PER_ERR_ARG;
  }
  peri_net_spec_defaults(t);
  st = per_net_add_table(s, t->name, &t->cfg, t->layout);
  if (st == PER_OK)
    st = per_net_set_limiter(s, s->tables[s->ntables - 1], t->min_size, t->spi,
                             t->margin);
  if (st != PER_OK) {
    char why[sizeof s->error];
    peri_msg m;
    memcpy(why, s->error, sizeof why);
    m = peri_net_line_msg(s, t->line);
    peri_msg_s(&m, why);
  }
  return st;
}

PERDEF per_status per_net_add_spec(per_net_server *s, const char *text) {
  peri_net_spec t;
  const char *p;
  uint32_t line = 0, keep;
  int open = 0;
  per_status st = PER_OK;
  if (!s) return PER_ERR_NULL;
  if (!text)
    return peri_net_fail(s, "per_net_add_spec", "text is NULL", PER_ERR_NULL);
  keep = s->ntables;
  memset(&t, 0, sizeof t);
  for (p = text; *p && st == PER_OK;) {
    const char *a = p, *e, *k, *ke, *v;
    unsigned key;
    ++line;
    while (*p && *p != '\n') ++p;
    e = p;
    if (*p) ++p;
    while (a < e && peri_net_blank(*a)) ++a;
    while (e > a && peri_net_blank(e[-1])) --e;
    if (a == e || *a == '#') continue;
    k = a;
    ke = a;
    while (ke < e && !peri_net_blank(*ke)) ++ke;
    v = ke;
    while (v < e && peri_net_blank(*v)) ++v;
    if ((size_t)(ke - k) == 5 && memcmp(k, "table", 5) == 0) {
      if (open) st = peri_net_spec_add(s, &t);
      if (st != PER_OK) break;
      memset(&t, 0, sizeof t);
      t.line = line;
      if (!peri_net_name_ok(v, (size_t)(e - v))) {
        peri_msg m = peri_net_line_msg(s, line);
        peri_msg_s(&m, "a table's name is 1 to 63 bytes without control "
                       "characters");
        st = PER_ERR_ARG;
        break;
      }
      memcpy(t.name, v, (size_t)(e - v));
      open = 1;
      continue;
    }
    for (key = 0; key < PERI_NET_NKEYS; ++key)
      if (strlen(peri_net_keys[key]) == (size_t)(ke - k) &&
          memcmp(peri_net_keys[key], k, (size_t)(ke - k)) == 0)
        break;
    {
      peri_msg m = peri_net_line_msg(s, line);
      const char *why = NULL;
      if (key == PERI_NET_NKEYS) why = "unknown key \"";
      else if (!open) why = "a key before the first `table` line: \"";
      else if (t.set & (1u << key)) why = "a second value of \"";
      else if (!peri_net_set_key(&t, key, v, (size_t)(e - v)))
        why = "not a value of \"";
      if (why) {
        char kb[24];
        size_t kn =
            (size_t)(ke - k) < sizeof kb - 1 ? (size_t)(ke - k) : sizeof kb - 1;
        memcpy(kb, k, kn);
        kb[kn] = 0;
        peri_msg_s(&m, why);
        peri_msg_s(&m, kb);
        peri_msg_s(&m, "\"");
        st = PER_ERR_ARG;
        break;
      }
      t.set |= 1u << key;
    }
  }
  if (st == PER_OK && open) st = peri_net_spec_add(s, &t);
  if (st != PER_OK) {
    char why[sizeof s->error];
    memcpy(why, s->error, sizeof why);
    peri_net_drop_tables(s, keep);
    memcpy(s->error, why, sizeof why);
    return st;
  }
  s->error[0] = 0;
  return PER_OK;
}

/* ---- replies ---- */

/* Room for a reply of n bytes in s->out (n <= max_message). */
static int peri_net_room(per_net_server *s, size_t n) {
  unsigned char *p;
  size_t cap;
  if (n <= s->out_cap) return 1;
  cap = s->out_cap ? s->out_cap : 4096u;
  while (cap < n) cap = cap > SIZE_MAX / 2 ? n : cap * 2;
  if (cap > s->max_message) cap = (size_t)s->max_message;
  if (cap < n) return 0;
  p = (unsigned char *)PER_MALLOC(cap, s->alloc_ctx);
  if (!p) return 0;
  if (s->out) PER_FREE(s->out, s->alloc_ctx);
  s->out = p;
  s->out_cap = cap;
  return 1;
}

/* Room for n aligned scratch bytes. */
static unsigned char *peri_net_scratch(per_net_server *s, size_t n) {
  unsigned char *p;
  if (n <= s->scratch_cap) return s->scratch;
  p = (unsigned char *)PER_MALLOC(n, s->alloc_ctx);
  if (!p) return NULL;
  if (s->scratch) PER_FREE(s->scratch, s->alloc_ctx);
  s->scratch = p;
  s->scratch_cap = n;
  return p;
}

/* A reply's header at out: op, id, status, message length. */
static void peri_net_header(unsigned char *out, uint32_t op, uint64_t id,
                            per_status st, size_t msg) {
  memcpy(out, "PERR", 4);
  peri_net_put(out + 4, PER_NET_VERSION, 2);
  peri_net_put(out + 6, op, 2);
  peri_net_put(out + 8, id, 8);
  peri_net_put(out + 16, (uint64_t)(uint32_t)(int32_t)st, 4);
  peri_net_put(out + 20, msg, 2);
  peri_net_put(out + 22, 0, 2);
}

/* A refusal: header and s->error as the message, in s->out when it has
   room, else in s->fallback (the message cut to fit). */
static per_status peri_net_refuse(per_net_server *s, per_net_table *t,
                                  uint32_t op, uint64_t id, per_status st,
                                  const void **reply, size_t *reply_len) {
  size_t msg = strlen(s->error);
  unsigned char *out;
  s->refused++;
  if (t) t->refused++;
  if (peri_net_room(s, PER_NET_REPLY_HEADER + msg)) {
    out = s->out;
  } else {
    out = s->fallback;
    if (msg > sizeof s->fallback - PER_NET_REPLY_HEADER)
      msg = sizeof s->fallback - PER_NET_REPLY_HEADER;
  }
  peri_net_header(out, op, id, st, msg);
  memcpy(out + PER_NET_REPLY_HEADER, s->error, msg);
  *reply = out;
  *reply_len = PER_NET_REPLY_HEADER + msg;
  return st;
}

/* The body of a successful reply of `body` bytes: its header written, the
   body's bytes to fill; NULL when it does not fit (s->error says so). */
static unsigned char *peri_net_body(per_net_server *s, uint32_t op, uint64_t id,
                                    size_t body) {
  if (body > s->max_message - PER_NET_REPLY_HEADER ||
      !peri_net_room(s, PER_NET_REPLY_HEADER + body))
    return NULL;
  peri_net_header(s->out, op, id, PER_OK, 0);
  return s->out + PER_NET_REPLY_HEADER;
}

/* The message of a buffer's refused call: its error, else the status. */
static void peri_net_from_buffer(per_net_server *s, const per_net_table *t,
                                 per_status st) {
  peri_msg m = peri_msg_into(s->error, sizeof s->error);
  peri_msg_s(&m, t->buf.error[0] ? t->buf.error : per_status_str(st));
}

/* A request of op with a once-only id (id & PER_NET_ONCE): 1 when it is
   answered here, *st its status (a repeat of a request t applied gets
   that request's reply again, PER_OK, with nothing applied; the id of
   another op, or no memory for t's ids, a refusal); 0 when it goes on,
   with t's memory ready to remember it. */
static int peri_net_once(per_net_server *s, per_net_table *t, uint32_t op,
                         uint64_t id, const void **reply, size_t *reply_len,
                         per_status *st) {
  const char *fn = op == PER_NET_INSERT ? "insert" : "update";
  const struct peri_net_seen *e = peri_net_recall(t, id);
  size_t body = op == PER_NET_INSERT ? 16u : 8u;
  unsigned char *o;
  if (!e) {
    if (peri_net_recall_ready(s, t)) return 0;
    peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    *st = peri_net_refuse(s, t, op, id, PER_ERR_NOMEM, reply, reply_len);
    return 1;
  }
  if (e->op != op) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "once-only request id", id);
    peri_msg_s(&m, " is that of an ");
    peri_msg_s(&m, e->op == PER_NET_INSERT ? "INSERT" : "UPDATE");
    peri_msg_s(&m, " this table applied");
    *st = peri_net_refuse(s, t, op, id, PER_ERR_ARG, reply, reply_len);
    return 1;
  }
  o = peri_net_body(s, op, id, body);
  if (!o) {
    peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    *st = peri_net_refuse(s, t, op, id, PER_ERR_NOMEM, reply, reply_len);
    return 1;
  }
  if (op == PER_NET_INSERT) {
    peri_net_put(o, e->a, 8);
    peri_net_put(o + 8, e->b, 4);
    peri_net_put(o + 12, 0, 4);
  } else {
    peri_net_put(o, e->b, 4);
    peri_net_put(o + 4, 0, 4);
  }
  s->repeats++;
  t->repeats++;
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + body;
  s->error[0] = 0;
  *st = PER_OK;
  return 1;
}

/* ---- ops ---- */

/* HELLO: item size and layout against the table's; the table's config. */
static per_status peri_net_hello(per_net_server *s, per_net_table *t,
                                 peri_net_in *in, uint64_t id,
                                 const void **reply, size_t *reply_len) {
  const per_config *c = &t->buf.cfg;
  uint32_t item_size, m;
  size_t lay = strlen(t->buf.layout);
  unsigned char *o;
  if (peri_net_left(in) < 6) goto format;
  item_size = (uint32_t)peri_net_take(in, 4);
  m = (uint32_t)peri_net_take(in, 2);
  if (peri_net_left(in) != m) goto format;
  if (item_size != c->item_size ||
      (m != 0 && lay != 0 && (m != lay || memcmp(in->p, t->buf.layout, m)))) {
    peri_msg msg = peri_net_msg(s, "hello");
    char theirs[96];
    size_t n = m < sizeof theirs - 1 ? m : sizeof theirs - 1;
    memcpy(theirs, in->p, n);
    theirs[n] = 0;
    peri_msg_s(&msg, "table \"");
    peri_msg_s(&msg, t->name);
    peri_msg_s(&msg, "\" has items of ");
    peri_msg_u(&msg, c->item_size);
    peri_msg_s(&msg, " bytes, layout \"");
    peri_msg_s(&msg, t->buf.layout);
    peri_msg_s(&msg, "\"; the client's are ");
    peri_msg_u(&msg, item_size);
    peri_msg_s(&msg, " bytes, \"");
    peri_msg_s(&msg, theirs);
    peri_msg_s(&msg, "\"");
    return peri_net_refuse(s, t, PER_NET_HELLO, id, PER_ERR_MISMATCH, reply,
                           reply_len);
  }
  o = peri_net_body(s, PER_NET_HELLO, id, 90 + lay);
  if (!o) goto big;
  peri_net_put(o, c->capacity, 4);
  peri_net_put(o + 4, c->item_size, 4);
  peri_net_put(o + 8, c->seq_len, 4);
  peri_net_put(o + 12, c->seq_stride, 4);
  peri_net_put(o + 16, c->flags, 4);
  peri_net_put(o + 20, c->max_unique, 4);
  peri_net_put_f64(o + 24, c->alpha);
  peri_net_put_f64(o + 32, c->beta0);
  peri_net_put_f64(o + 40, c->beta1);
  peri_net_put(o + 48, c->beta_steps, 8);
  peri_net_put_f64(o + 56, c->eps);
  peri_net_put_f64(o + 64, c->max_priority);
  peri_net_put_f64(o + 72, c->seq_eta);
  peri_net_put(o + 80, c->seed, 8);
  peri_net_put(o + 88, lay, 2);
  memcpy(o + 90, t->buf.layout, lay);
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + 90 + lay;
  s->error[0] = 0;
  return PER_OK;
format:
  peri_net_fail(s, "hello",
                "the body is not u32 item size, u16 layout "
                "length and that many bytes",
                PER_ERR_FORMAT);
  return peri_net_refuse(s, t, PER_NET_HELLO, id, PER_ERR_FORMAT, reply,
                         reply_len);
big:
  peri_net_fail(s, "hello", "out of memory", PER_ERR_NOMEM);
  return peri_net_refuse(s, t, PER_NET_HELLO, id, PER_ERR_NOMEM, reply,
                         reply_len);
}

/* INSERT: n items as one trajectory, with ends and TD errors. */
static per_status peri_net_insert(per_net_server *s, per_net_table *t,
                                  peri_net_in *in, uint64_t id,
                                  const void **reply, size_t *reply_len) {
  static const char fn[] = "insert";
  uint32_t n, flags, j;
  uint64_t need, traj;
  const unsigned char *items, *ends = NULL;
  float *td = NULL;
  unsigned char *o;
  per_status st;
  if (peri_net_left(in) < 8) {
    peri_net_fail(s, fn, "the body is shorter than u32 n, u32 flags",
                  PER_ERR_FORMAT);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  n = (uint32_t)peri_net_take(in, 4);
  flags = (uint32_t)peri_net_take(in, 4);
  if (flags & ~(uint32_t)(PER_NET_ENDS | PER_NET_TD)) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "unknown flags", flags);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_ARG, reply,
                           reply_len);
  }
  if (n == 0) {
    peri_net_fail(s, fn, "n is 0", PER_ERR_BATCH);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_BATCH, reply,
                           reply_len);
  }
  /* bytes an item (checked by division: times n it may pass 2^64) */
  need = (uint64_t)t->buf.cfg.item_size + ((flags & PER_NET_ENDS) ? 1u : 0u) +
         ((flags & PER_NET_TD) ? 4u : 0u);
  if (peri_net_left(in) % need != 0 || peri_net_left(in) / need != n) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "n", n);
    peri_msg_s(&m, " with these flags needs ");
    peri_msg_u(&m, need);
    peri_msg_s(&m, " bytes an item after n and flags; the body has ");
    peri_msg_u(&m, peri_net_left(in));
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  items = in->p;
  if (flags & PER_NET_ENDS) ends = items + (size_t)n * t->buf.cfg.item_size;
  if (flags & PER_NET_TD) {
    const unsigned char *src =
        items + (size_t)n * t->buf.cfg.item_size + (ends ? n : 0u);
    td = (float *)peri_net_scratch(s, (size_t)n * sizeof(float));
    if (!td) {
      peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
      return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_NOMEM, reply,
                             reply_len);
    }
    for (j = 0; j < n; ++j) {
      uint32_t u = (uint32_t)peri_net_get(src + 4u * j, 4);
      memcpy(&td[j], &u, 4);
    }
  }
  if (!peri_net_room(s, PER_NET_REPLY_HEADER + 16u)) {
    peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_NOMEM, reply,
                           reply_len);
  }
  if ((id & PER_NET_ONCE) &&
      peri_net_once(s, t, PER_NET_INSERT, id, reply, reply_len, &st))
    return st;
  st = peri_net_limit(s, t, 0);
  if (st != PER_OK) {
    t->busy++;
    return peri_net_refuse(s, t, PER_NET_INSERT, id, st, reply, reply_len);
  }
  traj = t->buf.trajs;
  st = td ? per_buffer_add_td(&t->buf, items, n, ends, td)
          : per_buffer_add_steps(&t->buf, items, n, ends);
  if (st != PER_OK) {
    peri_net_from_buffer(s, t, st);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, st, reply, reply_len);
  }
  t->inserts++;
  t->items_in += n;
  if (id & PER_NET_ONCE)
    peri_net_remember(t, id, PER_NET_INSERT, traj, t->buf.size);
  o = peri_net_body(s, PER_NET_INSERT, id, 16);
  peri_net_put(o, traj, 8);
  peri_net_put(o + 8, t->buf.size, 4);
  peri_net_put(o + 12, 0, 4);
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + 16u;
  s->error[0] = 0;
  return PER_OK;
}

/* SAMPLE: a batch into the reply, in place. */
static per_status peri_net_sample(per_net_server *s, per_net_table *t,
                                  peri_net_in *in, uint64_t id,
                                  const void **reply, size_t *reply_len) {
  static const char fn[] = "sample";
  per_sample_opts opts;
  uint32_t B, want, steps;
  uint64_t unit, body;
  double beta;
  unsigned char *o;
  per_status st;
  if (peri_net_left(in) != 24) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "the body is u32 B, u32 flags, f64 beta, u32 window, "
                   "u32 want: 24 bytes, not ");
    peri_msg_u(&m, peri_net_left(in));
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  memset(&opts, 0, sizeof opts);
  B = (uint32_t)peri_net_take(in, 4);
  opts.flags = (uint32_t)peri_net_take(in, 4);
  opts.beta = peri_net_get_f64(in->p);
  in->p += 8;
  opts.window = (uint32_t)peri_net_take(in, 4);
  want = (uint32_t)peri_net_take(in, 4);
  if (want & ~(uint32_t)PER_NET_NO_ITEMS) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "unknown want bits", want);
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, PER_ERR_ARG, reply,
                           reply_len);
  }
  steps = (opts.flags & PER_SAMPLE_SEQUENCES) && t->buf.cfg.seq_len
              ? t->buf.cfg.seq_len
              : 1u;
  unit = 12u +
         ((want & PER_NET_NO_ITEMS) ? 0u
                                    : (uint64_t)steps * t->buf.cfg.item_size) +
         ((opts.flags & PER_SAMPLE_SEQUENCES) ? steps : 0u);
  if (B == 0 ||
      (uint64_t)B > (s->max_message - PER_NET_REPLY_HEADER - 16u) / unit) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "B", B);
    peri_msg_s(&m, B ? " makes a reply larger than the largest message, "
                     : " (a batch is 1 or more)");
    if (B) peri_msg_u(&m, s->max_message);
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, PER_ERR_BATCH, reply,
                           reply_len);
  }
  st = peri_net_limit(s, t, 1);
  if (st != PER_OK) {
    t->busy++;
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, st, reply, reply_len);
  }
  body = 16u + (uint64_t)B * unit;
  o = peri_net_body(s, PER_NET_SAMPLE, id, (size_t)body);
  if (!o) {
    peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, PER_ERR_NOMEM, reply,
                           reply_len);
  }
  beta = (opts.flags & PER_SAMPLE_BETA) ? opts.beta : per_buffer_beta(&t->buf);
  {
    unsigned char *ids = o + 16, *w = ids + (size_t)8 * B;
    unsigned char *items = w + (size_t)4 * B;
    unsigned char *mask =
        items + ((want & PER_NET_NO_ITEMS)
                     ? 0u
                     : (size_t)B * steps * t->buf.cfg.item_size);
    if (opts.flags & PER_SAMPLE_SEQUENCES) opts.mask = mask;
    /* ids at 24 + 16 from the reply's start: 8-aligned in s->out, which
       PER_MALLOC aligns; weights at a multiple of 4 after them. */
    st = per_buffer_sample(&t->buf, B, &opts,
                           (want & PER_NET_NO_ITEMS) ? NULL : items,
                           (uint64_t *)(void *)ids, (float *)(void *)w);
    if (st != PER_OK) {
      peri_net_from_buffer(s, t, st);
      return peri_net_refuse(s, t, PER_NET_SAMPLE, id, st, reply, reply_len);
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    {
      uint32_t j;
      for (j = 0; j < B; ++j) {
        uint64_t v;
        uint32_t f;
        memcpy(&v, ids + 8u * j, 8);
        peri_net_put(ids + 8u * j, v, 8);
        memcpy(&f, w + 4u * j, 4);
        peri_net_put(w + 4u * j, f, 4);
      }
    }
#endif
  }
  peri_net_put(o, B, 4);
  peri_net_put(o + 4, steps, 4);
  peri_net_put_f64(o + 8, beta);
  t->samples++;
  t->items_out += B;
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + (size_t)body;
  s->error[0] = 0;
  return PER_OK;
}

/* UPDATE: priorities of items or sequences from TD errors. */
static per_status peri_net_update(per_net_server *s, per_net_table *t,
                                  peri_net_in *in, uint64_t id,
                                  const void **reply, size_t *reply_len) {
  static const char fn[] = "update";
  uint32_t n, flags, k, stale = 0;
  uint64_t need, ntd, j;
  uint64_t *ids;
  float *td;
  unsigned char *o;
  per_status st;
  if (peri_net_left(in) < 8) {
    peri_net_fail(s, fn, "the body is shorter than u32 n, u32 flags",
                  PER_ERR_FORMAT);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  n = (uint32_t)peri_net_take(in, 4);
  flags = (uint32_t)peri_net_take(in, 4);
  if (flags & ~(uint32_t)PER_NET_SEQUENCES) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "unknown flags", flags);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_ARG, reply,
                           reply_len);
  }
  k = (flags & PER_NET_SEQUENCES) ? t->buf.cfg.seq_len : 1u;
  if ((flags & PER_NET_SEQUENCES) && k == 0) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "table \"");
    peri_msg_s(&m, t->name);
    peri_msg_s(&m, "\" has no sequences (seq_len 0)");
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_ARG, reply,
                           reply_len);
  }
  if (n == 0) {
    peri_net_fail(s, fn, "n is 0", PER_ERR_BATCH);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_BATCH, reply,
                           reply_len);
  }
  /* n ids and n * k TD errors: checked by division, since 8 + 4k bytes a
     unit times n may pass 2^64 */
  ntd = (uint64_t)n * k;
  need = 8u + (uint64_t)4 * k;
  if (peri_net_left(in) % need != 0 || peri_net_left(in) / need != n) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "n", n);
    peri_msg_s(&m, " needs ");
    peri_msg_u(&m, need);
    peri_msg_s(&m, " bytes of id and TD errors each; the body has ");
    peri_msg_u(&m, peri_net_left(in));
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  ids = (uint64_t *)(void *)peri_net_scratch(s, peri_net_left(in) + 8u);
  if (!ids || !peri_net_room(s, PER_NET_REPLY_HEADER + 8u)) {
    peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_NOMEM, reply,
                           reply_len);
  }
  td = (float *)(void *)(ids + n);
  for (j = 0; j < n; ++j) ids[j] = peri_net_get(in->p + 8u * j, 8);
  for (j = 0; j < ntd; ++j) {
    uint32_t u = (uint32_t)peri_net_get(in->p + 8u * n + 4u * j, 4);
    memcpy(&td[j], &u, 4);
  }
  if ((id & PER_NET_ONCE) &&
      peri_net_once(s, t, PER_NET_UPDATE, id, reply, reply_len, &st))
    return st;
  st = (flags & PER_NET_SEQUENCES)
           ? per_buffer_update_seq(&t->buf, ids, td, n, &stale)
           : per_buffer_update(&t->buf, ids, td, n, &stale);
  if (st != PER_OK) {
    peri_net_from_buffer(s, t, st);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, st, reply, reply_len);
  }
  t->updates++;
  if (id & PER_NET_ONCE) peri_net_remember(t, id, PER_NET_UPDATE, 0, stale);
  o = peri_net_body(s, PER_NET_UPDATE, id, 8);
  peri_net_put(o, stale, 4);
  peri_net_put(o + 4, 0, 4);
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + 8u;
  s->error[0] = 0;
  return PER_OK;
}

/* INFO: sizes and counters. */
static per_status peri_net_info(per_net_server *s, per_net_table *t,
                                peri_net_in *in, uint64_t id,
                                const void **reply, size_t *reply_len) {
  const per_buffer *b = &t->buf;
  unsigned char *o;
  if (peri_net_left(in) != 0) {
    peri_net_fail(s, "info", "the body is empty", PER_ERR_FORMAT);
    return peri_net_refuse(s, t, PER_NET_INFO, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  o = peri_net_body(s, PER_NET_INFO, id, 128);
  if (!o) {
    peri_net_fail(s, "info", "out of memory", PER_ERR_NOMEM);
    return peri_net_refuse(s, t, PER_NET_INFO, id, PER_ERR_NOMEM, reply,
                           reply_len);
  }
  peri_net_put(o, b->cfg.capacity, 4);
  peri_net_put(o + 4, b->cfg.item_size, 4);
  peri_net_put(o + 8, b->size, 4);
  peri_net_put(o + 12, b->cfg.seq_len, 4);
  peri_net_put(o + 16, b->added, 8);
  peri_net_put(o + 24, b->trajs, 8);
  peri_net_put(o + 32, b->step, 8);
  peri_net_put_f64(o + 40, per_buffer_beta(b));
  peri_net_put(o + 48, t->inserts, 8);
  peri_net_put(o + 56, t->samples, 8);
  peri_net_put(o + 64, t->updates, 8);
  peri_net_put(o + 72, t->refused, 8);
  peri_net_put(o + 80, t->items_in, 8);
  peri_net_put(o + 88, t->items_out, 8);
  peri_net_put(o + 96, t->busy, 8);
  peri_net_put(o + 104, t->min_size, 8);
  peri_net_put_f64(o + 112, t->samples_per_insert);
  peri_net_put_f64(o + 120, t->error_margin);
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + 128u;
  s->error[0] = 0;
  return PER_OK;
}

PERDEF void *per_net_take_reply(per_net_server *s, const void *reply) {
  void *block;
  if (!s || !s->out || reply != (const void *)s->out) return NULL;
  block = s->out;
  s->out = NULL;
  s->out_cap = 0;
  return block;
}

PERDEF void per_net_reply_free(void *block, void *alloc_ctx) {
  if (block) PER_FREE(block, alloc_ctx);
}

PERDEF per_status per_net_handle(per_net_server *s, const void *req, size_t len,
                                 const void **reply, size_t *reply_len) {
  const unsigned char *r = (const unsigned char *)req;
  peri_net_in in;
  per_net_table *t;
  uint32_t version, op, k;
  uint64_t id;
  if (!s || !reply || !reply_len) return PER_ERR_NULL;
  s->requests++;
  if (!r) len = 0;
  if (len < PERI_NET_REQ_HEADER || memcmp(r, "PERQ", 4) != 0) {
    peri_msg m = peri_net_msg(s, "request");
    if (len < PERI_NET_REQ_HEADER) {
      peri_msg_s(&m, "shorter than a header: ");
      peri_msg_u(&m, len);
      peri_msg_s(&m, " bytes");
    } else {
      peri_msg_s(&m, "no PERQ magic: not a per request");
    }
    return peri_net_refuse(s, NULL, 0, 0, PER_ERR_FORMAT, reply, reply_len);
  }
  version = (uint32_t)peri_net_get(r + 4, 2);
  op = (uint32_t)peri_net_get(r + 6, 2);
  id = peri_net_get(r + 8, 8);
  if (version != PER_NET_VERSION) {
    peri_msg m = peri_net_msg(s, "request");
    peri_msg_nu(&m, "version", version);
    peri_msg_s(&m, ": this server speaks version 1");
    return peri_net_refuse(s, NULL, op, id, PER_ERR_VERSION, reply, reply_len);
  }
  k = r[16];
  if (len < PERI_NET_REQ_HEADER + k ||
      !peri_net_name_ok((const char *)r + PERI_NET_REQ_HEADER, k)) {
    peri_msg m = peri_net_msg(s, "request");
    peri_msg_s(&m, len < PERI_NET_REQ_HEADER + k
                       ? "shorter than its table name"
                       : "a table's name is 1 to 63 bytes without control "
                         "characters");
    return peri_net_refuse(s, NULL, op, id, PER_ERR_FORMAT, reply, reply_len);
  }
  t = per_net_find(s, (const char *)r + PERI_NET_REQ_HEADER, k);
  if (!t) {
    peri_msg m = peri_net_msg(s, "request");
    char name[PER_NET_NAME_MAX];
    memcpy(name, r + PERI_NET_REQ_HEADER, k);
    name[k] = 0;
    peri_msg_s(&m, "no table named \"");
    peri_msg_s(&m, name);
    peri_msg_s(&m, "\"");
    return peri_net_refuse(s, NULL, op, id, PER_ERR_INDEX, reply, reply_len);
  }
  in.p = r + PERI_NET_REQ_HEADER + k;
  in.end = r + len;
  switch (op) {
    case PER_NET_HELLO: return peri_net_hello(s, t, &in, id, reply, reply_len);
    case PER_NET_INSERT:
      return peri_net_insert(s, t, &in, id, reply, reply_len);
    case PER_NET_SAMPLE:
      return peri_net_sample(s, t, &in, id, reply, reply_len);
    case PER_NET_UPDATE:
      return peri_net_update(s, t, &in, id, reply, reply_len);
    case PER_NET_INFO: return peri_net_info(s, t, &in, id, reply, reply_len);
    default: {
      peri_msg m = peri_net_msg(s, "request");
      peri_msg_nu(&m, "unknown op", op);
      return peri_net_refuse(s, t, op, id, PER_ERR_FORMAT, reply, reply_len);
    }
  }
}

/* >>client_impl: per_net_client, requests over a ZeroMQ DEALER */

#ifdef PER_NET_CLIENT

/* c->error for call fn: "fn: " and what follows. */
static peri_msg peri_net_client_msg(per_net_client *c, const char *fn) {
  peri_msg m = peri_msg_into(c->error, sizeof c->error);
  peri_msg_s(&m, fn);
  peri_msg_s(&m, ": ");
  return m;
}

static per_status peri_net_client_fail(per_net_client *c, const char *fn,
                                       const char *what, per_status st) {
  peri_msg m = peri_net_client_msg(c, fn);
  peri_msg_s(&m, what);
  return st;
}

/* What ZeroMQ refused, in its words. */
static per_status peri_net_client_zmq(per_net_client *c, const char *fn,
                                      const char *what) {
  const char *why = zmq_strerror(zmq_errno());
  peri_msg m = peri_net_client_msg(c, fn);
  peri_msg_s(&m, what);
  peri_msg_s(&m, ": ");
  peri_msg_s(&m, why);
  return PER_ERR_IO;
}

/* A random start for the request ids, 63 bits: /dev/urandom's where
   there is one, with the time, the clock and addresses, mixed
   (splitmix64's finaliser). */
static uint64_t peri_net_client_seed(const per_net_client *c) {
  static uint64_t calls;
  uint64_t x = (uint64_t)(uintptr_t)c ^ ((uint64_t)(uintptr_t)&calls << 16) ^
               (++calls * UINT64_C(0x9E3779B97F4A7C15));
#ifndef PER_NO_STDIO
#ifndef _WIN32
  FILE *f = fopen("/dev/urandom", "rb");
  if (f) {
    unsigned char b[8];
    if (fread(b, 1, sizeof b, f) == sizeof b) x ^= peri_net_get(b, 8);
    fclose(f);
  }
#endif
  x ^= ((uint64_t)time(NULL) << 20) ^ (uint64_t)clock();
#endif
  x ^= x >> 30;
  x *= UINT64_C(0xBF58476D1CE4E5B9);
  x ^= x >> 27;
  x *= UINT64_C(0x94D049BB133111EB);
  x ^= x >> 31;
  return x >> 1;
}

/* c->sock: a new DEALER socket, linger 0, connected to c->endpoint (with
   ZMQ_IPV6 for a bracketed tcp address, which ZeroMQ otherwise never
   reaches). */
static per_status peri_net_client_connect(per_net_client *c, const char *fn) {
  int zero = 0, one = 1, err;
  peri_msg m;
  void *s = zmq_socket(c->ctx, ZMQ_DEALER);
  if (!s) return peri_net_client_zmq(c, fn, "no socket");
  if (zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) == 0 &&
      (strncmp(c->endpoint, "tcp://[", 7) != 0 ||
       zmq_setsockopt(s, ZMQ_IPV6, &one, sizeof one) == 0) &&
      (!c->curve_server[0] ||
       (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, c->curve_server, 41) == 0 &&
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, c->curve_public, 41) == 0 &&
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, c->curve_secret, 41) == 0)) &&
      zmq_connect(s, c->endpoint) == 0) {
    c->sock = s;
    return PER_OK;
  }
  err = zmq_errno();
  zmq_close(s);
  m = peri_net_client_msg(c, fn);
  peri_msg_s(&m, "cannot connect to \"");
  peri_msg_s(&m, c->endpoint);
  peri_msg_s(&m, "\": ");
  peri_msg_s(&m, zmq_strerror(err));
  return err == EINVAL || err == EPROTONOSUPPORT || err == ENOCOMPATPROTO
             ? PER_ERR_ARG
             : PER_ERR_IO;
}

/* n * each, or UINT64_MAX when that passes 2^64 - 1. */
static uint64_t peri_net_client_times(uint64_t n, uint64_t each) {
  return each && n > UINT64_MAX / each ? UINT64_MAX : n * each;
}

/* The checks every request passes: c open, a wait of 1 ms or more, and a
   request of `body` bytes of body within max_message. Then the request's
   header in c->buf, with the next request id: the body's start, or NULL
   with c->error set and *st the status (nothing sent). */
static unsigned char *peri_net_client_begin(per_net_client *c, const char *fn,
                                            uint32_t op, uint64_t body,
                                            per_status *st) {
  size_t k = strlen(c->table);
  uint64_t head = PERI_NET_REQ_HEADER + k;
  unsigned char *p;
  size_t cap;
  if (!c->ctx) {
    *st = peri_net_client_fail(c, fn, "the client is not open", PER_ERR_ARG);
    return NULL;
  }
  if (c->timeout_ms <= 0) {
    *st = peri_net_client_fail(c, fn,
                               "timeout_ms is 0 or negative: a wait is 1 ms "
                               "or more",
                               PER_ERR_ARG);
    return NULL;
  }
  if (c->max_message < head || body > c->max_message - head ||
      body > (uint64_t)SIZE_MAX - head) {
    peri_msg m = peri_net_client_msg(c, fn);
    peri_msg_s(&m, "a request of ");
    if (body <= UINT64_MAX - head) {
      peri_msg_u(&m, head + body);
      peri_msg_s(&m, " bytes");
    } else {
      peri_msg_s(&m, "2^64 bytes or more");
    }
    peri_msg_nu(&m, " is larger than max_message", c->max_message);
    *st = PER_ERR_BATCH;
    return NULL;
  }
  if (head + body > c->cap) { /* c->buf grows */
    cap = c->cap ? c->cap : 4096u;
    while (cap < head + body) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
    p = (unsigned char *)PER_MALLOC(cap, NULL);
    if (!p) {
      *st = peri_net_client_fail(c, fn, "out of memory", PER_ERR_NOMEM);
      return NULL;
    }
    if (c->buf) PER_FREE(c->buf, NULL);
    c->buf = p;
    c->cap = cap;
  }
  memcpy(c->buf, "PERQ", 4);
  peri_net_put(c->buf + 4, PER_NET_VERSION, 2);
  peri_net_put(c->buf + 6, op, 2);
  peri_net_put(c->buf + 8, c->next_id, 8);
  c->next_id = PER_NET_ONCE | ((c->next_id + 1u) & ~PER_NET_ONCE);
  c->buf[16] = (unsigned char)k;
  memcpy(c->buf + PERI_NET_REQ_HEADER, c->table, k);
  *st = PER_OK;
  return c->buf + head;
}

/* Milliseconds since *watch's first lap began: *us sums the laps, and a
   look ends one lap and starts the next (ZeroMQ's stopwatch, whose clock
   is monotonic). */
static uint64_t peri_net_client_ms(void **watch, uint64_t *us) {
  *us += zmq_stopwatch_stop(*watch);
  *watch = zmq_stopwatch_start();
  return *us / 1000u;
}

/* No reply within timeout ms: c->error says so, and c->sock is a new
   socket (NULL when one cannot be made: the next call tries again), so
   that a request still queued is dropped instead of sent later. */
static per_status peri_net_client_timeout(per_net_client *c, const char *fn,
                                          uint64_t timeout) {
  peri_msg m;
  zmq_close(c->sock);
  c->sock = NULL;
  peri_net_client_connect(c, fn);
  m = peri_net_client_msg(c, fn);
  peri_msg_nu(&m, "no reply within", timeout);
  peri_msg_s(&m, " ms from ");
  peri_msg_s(&m, c->endpoint);
  if (!c->sock) peri_msg_s(&m, " (and no new socket yet)");
  if (c->curve_server[0])
    peri_msg_s(&m, " (CURVE: is it the server's public key, and is this "
                   "client's among its --curve-clients?)");
  return PER_ERR_IO;
}

/* The reply of request id into *msg, waited for while the call's time
   lasts (timeout ms in all, measured by *watch and *us); replies of other
   ids are dropped, and of a message of several frames the last is the
   reply. PER_OK: *msg is a reply with per's header and that id. */
static per_status peri_net_client_wait(per_net_client *c, const char *fn,
                                       uint64_t id, uint64_t timeout,
                                       void **watch, uint64_t *us,
                                       zmq_msg_t *msg) {
  for (;;) {
    zmq_pollitem_t it;
    const unsigned char *p;
    uint64_t now = peri_net_client_ms(watch, us);
    int rc;
    if (now >= timeout) return peri_net_client_timeout(c, fn, timeout);
    memset(&it, 0, sizeof it);
    it.socket = c->sock;
    it.events = ZMQ_POLLIN;
    rc = zmq_poll(&it, 1, (long)(timeout - now));
    if (rc < 0 && zmq_errno() != EINTR)
      return peri_net_client_zmq(c, fn, "poll");
    if (rc <= 0) continue;
    if (zmq_msg_recv(msg, c->sock, ZMQ_DONTWAIT) < 0) {
      if (zmq_errno() == EAGAIN || zmq_errno() == EINTR) continue;
      return peri_net_client_zmq(c, fn, "receive");
    }
    while (zmq_msg_more(msg))
      if (zmq_msg_recv(msg, c->sock, 0) < 0)
        return peri_net_client_zmq(c, fn, "receive");
    p = (const unsigned char *)zmq_msg_data(msg);
    if (zmq_msg_size(msg) < PER_NET_REPLY_HEADER || memcmp(p, "PERR", 4)) {
      peri_msg m = peri_net_client_msg(c, fn);
      peri_msg_s(&m, c->endpoint);
      peri_msg_s(&m, " sent a reply that is not per's");
      return PER_ERR_FORMAT;
    }
    if (peri_net_get(p + 8, 8) == id) return PER_OK;
    c->dropped++;
  }
}

/* Send the request (len bytes of c->buf) while the call's time lasts
   (a socket with no peer yet queues it; a full queue waits). */
static per_status peri_net_client_send(per_net_client *c, const char *fn,
                                       size_t len, uint64_t timeout,
                                       void **watch, uint64_t *us) {
  for (;;) {
    zmq_pollitem_t it;
    uint64_t now;
    if (zmq_send(c->sock, c->buf, len, ZMQ_DONTWAIT) >= 0) return PER_OK;
    if (zmq_errno() != EAGAIN && zmq_errno() != EINTR)
      return peri_net_client_zmq(c, fn, "send");
    now = peri_net_client_ms(watch, us);
    if (now >= timeout) return peri_net_client_timeout(c, fn, timeout);
    memset(&it, 0, sizeof it);
    it.socket = c->sock;
    it.events = ZMQ_POLLOUT;
    if (zmq_poll(&it, 1, (long)(timeout - now)) < 0 && zmq_errno() != EINTR)
      return peri_net_client_zmq(c, fn, "poll");
  }
}

/* Send the request (len bytes of c->buf, op op) and wait for its reply,
   sending it again while it is busy and busy_wait says so. PER_OK: *msg
   (initialised here, closed by the caller) holds the reply, whose body
   is *body_len bytes at *body. Otherwise *msg is closed, c->error says
   why (the server's message when it refused) and the status returns. */
static per_status peri_net_client_ask(per_net_client *c, const char *fn,
                                      uint32_t op, size_t len, zmq_msg_t *msg,
                                      const unsigned char **body,
                                      size_t *body_len) {
  uint64_t id = peri_net_get(c->buf + 8, 8), us = 0;
  uint64_t timeout = (uint64_t)c->timeout_ms;
  const unsigned char *p = NULL;
  size_t n = 0, m;
  long delay = 1;
  int replied = 0, again = c->resend;
  per_status st;
  void *watch;
  zmq_msg_init(msg);
  if (!c->sock && (st = peri_net_client_connect(c, fn)) != PER_OK) {
    zmq_msg_close(msg);
    return st;
  }
  c->requests++;
  watch = zmq_stopwatch_start();
  for (;;) {
    replied = 0;
    st = peri_net_client_send(c, fn, len, timeout, &watch, &us);
    if (st == PER_OK)
      st = peri_net_client_wait(c, fn, id, timeout, &watch, &us, msg);
    if (st == PER_ERR_IO && again && c->sock &&
        peri_net_client_ms(&watch, &us) >= timeout) {
      again = 0; /* timed out: once more, on the new socket, as long */
      us = 0;
      c->resent++;
      continue;
    }
    if (st != PER_OK) break;
    p = (const unsigned char *)zmq_msg_data(msg);
    n = zmq_msg_size(msg);
    if (peri_net_get(p + 4, 2) != PER_NET_VERSION ||
        peri_net_get(p + 6, 2) != op) {
      peri_msg e = peri_net_client_msg(c, fn);
      peri_msg_nu(&e, "a reply of version", peri_net_get(p + 4, 2));
      peri_msg_nu(&e, ", op", peri_net_get(p + 6, 2));
      peri_msg_nu(&e, " to a request of version 1, op", op);
      st = PER_ERR_FORMAT;
      break;
    }
    st = (per_status)(int32_t)(uint32_t)peri_net_get(p + 16, 4);
    replied = 1;
    if (st == PER_ERR_BUSY && c->busy_wait &&
        peri_net_client_ms(&watch, &us) + (uint64_t)delay < timeout) {
      zmq_poll(NULL, 0, delay); /* a sleep */
      delay = delay >= 25 ? 50 : delay * 2;
      c->retries++;
      continue;
    }
    break;
  }
  zmq_stopwatch_stop(watch);
  if (st == PER_OK) {
    *body = p + PER_NET_REPLY_HEADER;
    *body_len = n - PER_NET_REPLY_HEADER;
    return PER_OK;
  }
  if (replied) { /* the server's message, cut to fit */
    m = (size_t)peri_net_get(p + 20, 2);
    if (m > n - PER_NET_REPLY_HEADER) m = n - PER_NET_REPLY_HEADER;
    if (m > sizeof c->error - 1) m = sizeof c->error - 1;
    memcpy(c->error, p + PER_NET_REPLY_HEADER, m);
    c->error[m] = 0;
  }
  zmq_msg_close(msg);
  return st;
}

/* A reply's body of another length or shape than the request's. */
static per_status peri_net_client_shape(per_net_client *c, const char *fn,
                                        zmq_msg_t *msg, size_t n) {
  peri_msg m = peri_net_client_msg(c, fn);
  peri_msg_nu(&m, "a reply's body of", n);
  peri_msg_s(&m, " bytes, not of the shape the request asked for");
  zmq_msg_close(msg);
  return PER_ERR_FORMAT;
}

/* HELLO: item_size and the layout (lay bytes) against the table's; the
   table's config into c. */
static per_status peri_net_client_hello(per_net_client *c, const char *fn,
                                        uint32_t item_size, const char *layout,
                                        size_t lay) {
  per_config *t = &c->table_cfg;
  const unsigned char *b;
  unsigned char *o;
  zmq_msg_t msg;
  size_t n, m;
  per_status st;
  o = peri_net_client_begin(c, fn, PER_NET_HELLO, 6u + lay, &st);
  if (!o) return st;
  peri_net_put(o, item_size, 4);
  peri_net_put(o + 4, lay, 2);
  if (lay) memcpy(o + 6, layout, lay);
  st = peri_net_client_ask(c, fn, PER_NET_HELLO, (size_t)(o - c->buf) + 6 + lay,
                           &msg, &b, &n);
  if (st != PER_OK) return st;
  m = n >= 90 ? (size_t)peri_net_get(b + 88, 2) : 0;
  if (n < 90 || n != 90 + m || m >= PER_LAYOUT_MAX ||
      peri_net_get(b + 4, 4) != item_size)
    return peri_net_client_shape(c, fn, &msg, n);
  memset(t, 0, sizeof *t);
  t->capacity = (uint32_t)peri_net_get(b, 4);
  t->item_size = (uint32_t)peri_net_get(b + 4, 4);
  t->seq_len = (uint32_t)peri_net_get(b + 8, 4);
  t->seq_stride = (uint32_t)peri_net_get(b + 12, 4);
  t->flags = (uint32_t)peri_net_get(b + 16, 4);
  t->max_unique = (uint32_t)peri_net_get(b + 20, 4);
  t->alpha = peri_net_get_f64(b + 24);
  t->beta0 = peri_net_get_f64(b + 32);
  t->beta1 = peri_net_get_f64(b + 40);
  t->beta_steps = peri_net_get(b + 48, 8);
  t->eps = peri_net_get_f64(b + 56);
  t->max_priority = peri_net_get_f64(b + 64);
  t->seq_eta = peri_net_get_f64(b + 72);
  t->seed = peri_net_get(b + 80, 8);
  memcpy(c->layout, b + 90, m);
  c->layout[m] = 0;
  c->item_size = t->item_size;
  c->seq_len = t->seq_len;
  zmq_msg_close(&msg);
  return PER_OK;
}

/* INFO into *info (fn: the call, for messages). */
static per_status peri_net_client_info(per_net_client *c, const char *fn,
                                       per_net_info *info) {
  const unsigned char *b;
  unsigned char *o;
  per_net_info r;
  zmq_msg_t msg;
  size_t n;
  per_status st;
  o = peri_net_client_begin(c, fn, PER_NET_INFO, 0, &st);
  if (!o) return st;
  st = peri_net_client_ask(c, fn, PER_NET_INFO, (size_t)(o - c->buf), &msg, &b,
                           &n);
  if (st != PER_OK) return st;
  /* 128 bytes; 80 from a server without the rate limiter's fields */
  if (n != 80 && n < 128) return peri_net_client_shape(c, fn, &msg, n);
  memset(&r, 0, sizeof r);
  r.capacity = (uint32_t)peri_net_get(b, 4);
  r.item_size = (uint32_t)peri_net_get(b + 4, 4);
  r.size = (uint32_t)peri_net_get(b + 8, 4);
  r.seq_len = (uint32_t)peri_net_get(b + 12, 4);
  r.added = peri_net_get(b + 16, 8);
  r.trajectories = peri_net_get(b + 24, 8);
  r.step = peri_net_get(b + 32, 8);
  r.beta = peri_net_get_f64(b + 40);
  r.inserts = peri_net_get(b + 48, 8);
  r.samples = peri_net_get(b + 56, 8);
  r.updates = peri_net_get(b + 64, 8);
  r.refused = peri_net_get(b + 72, 8);
  if (n >= 128) {
    r.items_inserted = peri_net_get(b + 80, 8);
    r.items_sampled = peri_net_get(b + 88, 8);
    r.busy = peri_net_get(b + 96, 8);
    r.min_size = peri_net_get(b + 104, 8);
    r.samples_per_insert = peri_net_get_f64(b + 112);
    r.error_margin = peri_net_get_f64(b + 120);
  }
  zmq_msg_close(&msg);
  *info = r;
  return PER_OK;
}

/* 1 when key is 40 characters of Z85 (32 bytes), copied into out. */
static int peri_net_client_key(const char *key, char out[41]) {
  uint8_t raw[32];
  if (!key || strlen(key) != 40 || !zmq_z85_decode(raw, key)) return 0;
  memcpy(out, key, 41);
  return 1;
}

PERDEF per_status per_net_client_open(per_net_client *c, const char *endpoint,
                                      const char *table, uint32_t item_size,
                                      const char *layout, int timeout_ms) {
  return per_net_client_open_curve(c, endpoint, table, item_size, layout,
                                   timeout_ms, NULL);
}

PERDEF per_status per_net_client_open_curve(per_net_client *c,
                                            const char *endpoint,
                                            const char *table,
                                            uint32_t item_size,
                                            const char *layout, int timeout_ms,
                                            const per_net_curve *curve) {
  const char *fn = curve ? "per_net_client_open_curve" : "per_net_client_open";
  size_t k, lay;
  per_status st;
  if (!c) return PER_ERR_NULL;
  memset(c, 0, sizeof *c);
  if (curve) {
    const char *bad =
        !peri_net_client_key(curve->server_public, c->curve_server)
            ? "server_public"
        : !peri_net_client_key(curve->public_key, c->curve_public)
            ? "public_key"
        : !peri_net_client_key(curve->secret_key, c->curve_secret)
            ? "secret_key"
            : NULL;
    peri_msg m;
    if (bad) {
      memset(c, 0, sizeof *c);
      m = peri_net_client_msg(c, fn);
      peri_msg_s(&m, "curve->");
      peri_msg_s(&m, bad);
      peri_msg_s(&m, " is not a key: 40 characters of Z85 (zmq_curve_keypair)");
      return PER_ERR_ARG;
    }
    if (!zmq_has("curve")) {
      memset(c, 0, sizeof *c);
      m = peri_net_client_msg(c, fn);
      peri_msg_s(&m, "this libzmq was built without CURVE (zmq_has)");
      return PER_ERR_ARG;
    }
  }
  if (!endpoint || !table)
    return peri_net_client_fail(c, fn, "endpoint or table is NULL",
                                PER_ERR_NULL);
  k = strlen(table);
  lay = layout ? strlen(layout) : 0;
  if (!peri_net_name_ok(table, k)) {
    peri_msg m = peri_net_client_msg(c, fn);
    peri_msg_s(&m, "a table's name is 1 to 63 bytes without control "
                   "characters, not one of ");
    peri_msg_u(&m, k);
    peri_msg_s(&m, " bytes");
    return PER_ERR_ARG;
  }
  if (timeout_ms <= 0)
    return peri_net_client_fail(c, fn,
                                "timeout_ms is 0 or negative: a wait is 1 ms "
                                "or more",
                                PER_ERR_ARG);
  if (lay >= PER_LAYOUT_MAX) {
    peri_msg m = peri_net_client_msg(c, fn);
    peri_msg_s(&m, "the layout has ");
    peri_msg_u(&m, lay);
    peri_msg_s(&m, " chars, more than 511");
    return PER_ERR_ARG;
  }
  c->endpoint = (char *)PER_MALLOC(strlen(endpoint) + 1, NULL);
  if (!c->endpoint)
    return peri_net_client_fail(c, fn, "out of memory", PER_ERR_NOMEM);
  memcpy(c->endpoint, endpoint, strlen(endpoint) + 1);
  memcpy(c->table, table, k + 1);
  c->timeout_ms = timeout_ms;
  c->busy_wait = 1;
  c->max_message = PER_NET_MAX_MESSAGE;
  c->resend = 1;
  c->next_id = PER_NET_ONCE | peri_net_client_seed(c);
  c->ctx = zmq_ctx_new();
  st = c->ctx ? peri_net_client_connect(c, fn)
              : peri_net_client_zmq(c, fn, "no ZeroMQ context");
  if (st == PER_OK && item_size == 0) { /* learn it */
    per_net_info info;
    st = peri_net_client_info(c, fn, &info);
    item_size = info.item_size;
  }
  if (st == PER_OK) st = peri_net_client_hello(c, fn, item_size, layout, lay);
  if (st != PER_OK) {
    char why[sizeof c->error];
    memcpy(why, c->error, sizeof why);
    per_net_client_close(c);
    memcpy(c->error, why, sizeof why);
    return st;
  }
  c->error[0] = 0;
  return PER_OK;
}

PERDEF per_status per_net_client_insert(per_net_client *c, const void *items,
                                        uint32_t n, const uint8_t *ends,
                                        const float *td, uint64_t *trajectory) {
  static const char fn[] = "per_net_client_insert";
  const unsigned char *b;
  unsigned char *o;
  zmq_msg_t msg;
  size_t len, got;
  uint64_t traj;
  uint32_t j;
  per_status st;
  if (!c) return PER_ERR_NULL;
  if (!items) return peri_net_client_fail(c, fn, "items is NULL", PER_ERR_NULL);
  if (n == 0)
    return peri_net_client_fail(c, fn, "n is 0 (an insert holds 1 or more)",
                                PER_ERR_BATCH);
  o = peri_net_client_begin(
      c, fn, PER_NET_INSERT,
      8u + peri_net_client_times(n, (uint64_t)c->item_size + (ends ? 1u : 0u) +
                                        (td ? 4u : 0u)),
      &st);
  if (!o) return st;
  peri_net_put(o, n, 4);
  peri_net_put(o + 4,
               (ends ? (uint32_t)PER_NET_ENDS : 0u) |
                   (td ? (uint32_t)PER_NET_TD : 0u),
               4);
  o += 8;
  memcpy(o, items, (size_t)n * c->item_size);
  o += (size_t)n * c->item_size;
  if (ends) {
    memcpy(o, ends, n);
    o += n;
  }
  if (td)
    for (j = 0; j < n; ++j, o += 4) {
      uint32_t u;
      memcpy(&u, &td[j], 4);
      peri_net_put(o, u, 4);
    }
  len = (size_t)(o - c->buf);
  st = peri_net_client_ask(c, fn, PER_NET_INSERT, len, &msg, &b, &got);
  if (st != PER_OK) return st;
  if (got != 16) return peri_net_client_shape(c, fn, &msg, got);
  traj = peri_net_get(b, 8);
  zmq_msg_close(&msg);
  if (trajectory) *trajectory = traj;
  c->error[0] = 0;
  return PER_OK;
}

PERDEF per_status per_net_client_sample(per_net_client *c, uint32_t B,
                                        const per_sample_opts *opts,
                                        void *items_out, uint64_t *ids,
                                        float *weights, double *beta) {
  static const char fn[] = "per_net_client_sample";
  uint32_t flags = opts ? opts->flags : 0u, s, j;
  const unsigned char *b;
  unsigned char *o;
  zmq_msg_t msg;
  uint64_t unit, steps;
  size_t got;
  per_status st;
  if (!c) return PER_ERR_NULL;
  if (B == 0)
    return peri_net_client_fail(c, fn, "B is 0 (a batch is 1 or more)",
                                PER_ERR_BATCH);
  o = peri_net_client_begin(c, fn, PER_NET_SAMPLE, 24, &st);
  if (!o) return st;
  peri_net_put(o, B, 4);
  peri_net_put(o + 4, flags, 4);
  peri_net_put_f64(o + 8, opts ? opts->beta : 0.0);
  peri_net_put(o + 16, opts ? opts->window : 0u, 4);
  peri_net_put(o + 20, items_out ? 0u : (uint32_t)PER_NET_NO_ITEMS, 4);
  st = peri_net_client_ask(c, fn, PER_NET_SAMPLE, (size_t)(o - c->buf) + 24,
                           &msg, &b, &got);
  if (st != PER_OK) return st;
  /* B units of an id, a weight, s steps' items (unless not asked for)
     and with sequences s mask bytes */
  s = (flags & PER_SAMPLE_SEQUENCES) ? c->seq_len : 1u;
  steps = (uint64_t)B * s;
  unit = 12u + (items_out ? (uint64_t)s * c->item_size : 0u) +
         ((flags & PER_SAMPLE_SEQUENCES) ? s : 0u);
  if (got < 16 || peri_net_get(b, 4) != B || peri_net_get(b + 4, 4) != s ||
      s == 0 || (got - 16) % unit != 0 || (got - 16) / unit != B)
    return peri_net_client_shape(c, fn, &msg, got);
  if (beta) *beta = peri_net_get_f64(b + 8);
  b += 16;
  if (ids)
    for (j = 0; j < B; ++j) ids[j] = peri_net_get(b + 8u * j, 8);
  b += (size_t)8 * B;
  if (weights)
    for (j = 0; j < B; ++j) {
      uint32_t u = (uint32_t)peri_net_get(b + 4u * j, 4);
      memcpy(&weights[j], &u, 4);
    }
  b += (size_t)4 * B;
  if (items_out) {
    memcpy(items_out, b, (size_t)steps * c->item_size);
    b += (size_t)steps * c->item_size;
  }
  if ((flags & PER_SAMPLE_SEQUENCES) && opts->mask)
    memcpy(opts->mask, b, (size_t)steps);
  zmq_msg_close(&msg);
  c->error[0] = 0;
  return PER_OK;
}

PERDEF per_status per_net_client_update(per_net_client *c, const uint64_t *ids,
                                        const float *td, uint32_t n,
                                        int sequences, uint32_t *stale) {
  static const char fn[] = "per_net_client_update";
  const unsigned char *b;
  unsigned char *o;
  zmq_msg_t msg;
  uint64_t k, ntd, j;
  size_t got;
  uint32_t nstale;
  per_status st;
  if (!c) return PER_ERR_NULL;
  if (!ids || !td)
    return peri_net_client_fail(c, fn, "ids or td is NULL", PER_ERR_NULL);
  if (n == 0)
    return peri_net_client_fail(c, fn, "n is 0 (an update holds 1 or more)",
                                PER_ERR_BATCH);
  if (sequences != 0 && sequences != 1)
    return peri_net_client_fail(c, fn, "sequences is 0 or 1", PER_ERR_ARG);
  if (sequences && c->ctx && c->seq_len == 0) {
    peri_msg m = peri_net_client_msg(c, fn);
    peri_msg_s(&m, "sequences: table \"");
    peri_msg_s(&m, c->table);
    peri_msg_s(&m, "\" has no sequences (seq_len 0)");
    return PER_ERR_ARG;
  }
  k = sequences ? c->seq_len : 1u;
  ntd = (uint64_t)n * k;
  o = peri_net_client_begin(
      c, fn, PER_NET_UPDATE,
      8u + peri_net_client_times(n, 8u + peri_net_client_times(k, 4u)), &st);
  if (!o) return st;
  peri_net_put(o, n, 4);
  peri_net_put(o + 4, sequences ? (uint32_t)PER_NET_SEQUENCES : 0u, 4);
  o += 8;
  for (j = 0; j < n; ++j, o += 8) peri_net_put(o, ids[j], 8);
  for (j = 0; j < ntd; ++j, o += 4) {
    uint32_t u;
    memcpy(&u, &td[j], 4);
    peri_net_put(o, u, 4);
  }
  st = peri_net_client_ask(c, fn, PER_NET_UPDATE, (size_t)(o - c->buf), &msg,
                           &b, &got);
  if (st != PER_OK) return st;
  if (got != 8) return peri_net_client_shape(c, fn, &msg, got);
  nstale = (uint32_t)peri_net_get(b, 4);
  zmq_msg_close(&msg);
  if (stale) *stale = nstale;
  c->error[0] = 0;
  return PER_OK;
}

PERDEF per_status per_net_client_info(per_net_client *c, per_net_info *info) {
  per_status st;
  if (!c) return PER_ERR_NULL;
  if (!info)
    return peri_net_client_fail(c, "per_net_client_info", "info is NULL",
                                PER_ERR_NULL);
  st = peri_net_client_info(c, "per_net_client_info", info);
  if (st == PER_OK) c->error[0] = 0;
  return st;
}

PERDEF void per_net_client_close(per_net_client *c) {
  if (!c) return;
  if (c->sock) zmq_close(c->sock);
  if (c->ctx)
    while (zmq_ctx_term(c->ctx) != 0 && zmq_errno() == EINTR) continue;
  if (c->buf) PER_FREE(c->buf, NULL);
  if (c->endpoint) PER_FREE(c->endpoint, NULL);
  memset(c, 0, sizeof *c);
}

#endif /* PER_NET_CLIENT */

#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_NET_IMPLEMENTATION */
