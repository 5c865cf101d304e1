/*
 * Collie public C API. Shaped like NCCL's so that porting is a rename: every nccl* name has a
 * collie* twin with the same arguments and meaning. Host buffers need no stream (pass NULL).
 */
#ifndef COLLIE_COLLIE_H_
#define COLLIE_COLLIE_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The project's one version number: CMake reads these three lines for the library's VERSION
 * and SONAME (libcollie.so.COLLIE_MAJOR), so a release changes them here only. */
#define COLLIE_MAJOR 0
#define COLLIE_MINOR 2
#define COLLIE_PATCH 0
#define COLLIE_VERSION_CODE (COLLIE_MAJOR * 10000 + COLLIE_MINOR * 100 + COLLIE_PATCH)

#define COLLIE_UNIQUE_ID_BYTES 128

/* What libcollie.so exports: the shared library hides every symbol the headers do not mark. */
#if defined(__GNUC__)
#define COLLIE_API __attribute__((visibility("default")))
#else
#define COLLIE_API
#endif

typedef struct collieComm* collieComm_t;

/* Opaque to the user: carries the store address, a random 128-bit secret and a communicator id.
 */
typedef struct {
  char internal[COLLIE_UNIQUE_ID_BYTES];
} collieUniqueId;

typedef enum {
  collieSuccess = 0,
  collieUnhandledSystemError = 1,
  collieSystemError = 2,
  collieInternalError = 3,
  collieInvalidArgument = 4,
  collieInvalidUsage = 5,
  collieRemoteError = 6,
  collieInProgress = 7,
  collieTimeout = 8,
  collieNumResults = 9
} collieResult_t;

typedef enum {
  collieInt8 = 0,
  collieChar = 0,
  collieUint8 = 1,
  collieInt32 = 2,
  collieInt = 2,
  collieUint32 = 3,
  collieInt64 = 4,
  collieUint64 = 5,
  collieFloat16 = 6,
  collieHalf = 6,
  collieFloat32 = 7,
  collieFloat = 7,
  collieFloat64 = 8,
  collieDouble = 8,
  collieBfloat16 = 9,
  /* 8-bit floats as NCCL numbers them: e4m3 is the "fn" variant (no infinities, largest
   * finite 448, NaN 0x7f/0xff), e5m2 is IEEE-like (infinities, largest finite 57344).
   * Reductions compute in float and round to nearest even, saturating to the largest finite
   * value (an infinity in becomes it too); NaN stays NaN. */
  collieFloat8e4m3 = 10,
  collieFloat8e5m2 = 11,
  collieNumTypes = 12
} collieDataType_t;

typedef enum {
  collieSum = 0,
  collieProd = 1,
  collieMax = 2,
  collieMin = 3,
  collieAvg = 4,
  /* The built-in ops' count, and the least value of an op made by collieRedOpCreatePreMulSum. */
  collieNumOps = 5,
  /* The largest value an op may take: keeps the enum int-sized and every created op in range. */
  collieMaxRedOp = 0x7fffffff
} collieRedOp_t;

/* collieCommSplit's color for a rank that joins no new communicator. */
#define COLLIE_SPLIT_NOCOLOR -1

/* Version as MAJOR*10000 + MINOR*100 + PATCH. */
COLLIE_API collieResult_t collieGetVersion(int* version);

/* Called on one rank (the future rank 0): starts nothing yet, picks the store address (this
 * host, COLLIE_SOCKET_IFNAME if set, a free port) and a random secret. Broadcast the id to
 * every rank out of band, then call collieCommInitRank everywhere. */
COLLIE_API collieResult_t collieGetUniqueId(collieUniqueId* uniqueId);

/* Collective over all nranks: rank 0 serves the store at the id's address. */
COLLIE_API collieResult_t collieCommInitRank(collieComm_t* comm, int nranks, collieUniqueId commId,
                                             int rank);

/* Reads RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun, collie-run), or OMPI_COMM_WORLD_* /
 * SLURM_* / PMI_* for rank and size with MASTER_ADDR/MASTER_PORT for the store. */
COLLIE_API collieResult_t collieCommInitFromEnv(collieComm_t* comm);

/* Frees the communicator; must not be used afterwards. Not collective. */
COLLIE_API collieResult_t collieCommDestroy(collieComm_t comm);

/* Unblocks every pending operation of this communicator (they fail), tells the peers, frees it.
 */
COLLIE_API collieResult_t collieCommAbort(collieComm_t comm);

COLLIE_API collieResult_t collieCommCount(const collieComm_t comm, int* count);
COLLIE_API collieResult_t collieCommUserRank(const collieComm_t comm, int* rank);

/* The first error an asynchronous operation of this communicator hit (collieSuccess if none);
 * collieInProgress while init has not finished. */
COLLIE_API collieResult_t collieCommGetAsyncError(collieComm_t comm, collieResult_t* asyncError);

/* sendbuff may equal recvbuff (in place). Host memory: blocking, returns when the result is in
 * recvbuff; stream is ignored. CUDA device memory (builds with CUDA): ordered on stream (a
 * cudaStream_t; NULL is the legacy default stream): starts once the stream reaches the call,
 * returns when the op is done, and later work on the stream waits for it (an event); a failure
 * is returned and shows in collieCommGetAsyncError. */
COLLIE_API collieResult_t collieAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          collieDataType_t datatype, collieRedOp_t op,
                                          collieComm_t comm, void* stream);

/* Each rank's sendbuff holds nranks * recvcount elements; rank r receives the reduction of
 * block r. In place: recvbuff == sendbuff + rank * recvcount elements. */
COLLIE_API collieResult_t collieReduceScatter(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, collieDataType_t datatype,
                                              collieRedOp_t op, collieComm_t comm, void* stream);

/* Each rank contributes sendcount elements; recvbuff (nranks * sendcount elements) holds rank
 * r's block at offset r * sendcount. In place: sendbuff == recvbuff + rank * sendcount. */
COLLIE_API collieResult_t collieAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          collieDataType_t datatype, collieComm_t comm,
                                          void* stream);

/* Copies root's sendbuff into every rank's recvbuff (count elements). sendbuff is read on root
 * only (NULL elsewhere is fine); in place on root: sendbuff == recvbuff. */
COLLIE_API collieResult_t collieBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                          collieDataType_t datatype, int root, collieComm_t comm,
                                          void* stream);

/* Reduces every rank's sendbuff into root's recvbuff. recvbuff is written on root only (NULL
 * elsewhere is fine). */
COLLIE_API collieResult_t collieReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       collieDataType_t datatype, collieRedOp_t op, int root,
                                       collieComm_t comm, void* stream);

/* Returns once every rank has entered it. */
COLLIE_API collieResult_t collieBarrier(collieComm_t comm);

/* Each rank sends count elements to every rank and receives count from each: block j of
 * sendbuff (offset j * count) goes to rank j, block i of recvbuff comes from rank i. Both hold
 * nranks * count elements. In place (sendbuff == recvbuff) is allowed. */
COLLIE_API collieResult_t collieAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                         collieDataType_t datatype, collieComm_t comm,
                                         void* stream);

/* All-to-all with a count per peer: sendcounts[j] elements from sendbuff + sdispls[j] go to rank
 * j, recvcounts[i] elements from rank i land at recvbuff + rdispls[i] (counts and displacements
 * in elements). recvcounts[i] on this rank must equal sendcounts[this rank] on rank i. The
 * buffers must not overlap (no in-place form). Inside a group the four arrays, like the buffers,
 * must stay valid until collieGroupEnd. */
COLLIE_API collieResult_t collieAlltoAllv(const void* sendbuff, const size_t sendcounts[],
                                          const size_t sdispls[], void* recvbuff,
                                          const size_t recvcounts[], const size_t rdispls[],
                                          collieDataType_t datatype, collieComm_t comm,
                                          void* stream);

/* Root's recvbuff (nranks * count elements) gets rank i's sendbuff (count) at offset i * count.
 * recvbuff is used on root only; in place on root: sendbuff == recvbuff + root * count. */
COLLIE_API collieResult_t collieGather(const void* sendbuff, void* recvbuff, size_t count,
                                       collieDataType_t datatype, int root, collieComm_t comm,
                                       void* stream);

/* Rank i's recvbuff (count elements) gets block i of root's sendbuff (nranks * count). sendbuff
 * is used on root only; in place on root: recvbuff == sendbuff + root * count. */
COLLIE_API collieResult_t collieScatter(const void* sendbuff, void* recvbuff, size_t count,
                                        collieDataType_t datatype, int root, collieComm_t comm,
                                        void* stream);

/* Point-to-point. A send to peer matches the receive from this rank with the same tag (collieSend
 * and collieRecv use tag 0), in order per pair of ranks and tag; count and datatype must agree
 * (else collieInvalidUsage on both ranks). peer may be this rank, within a group. Host memory:
 * blocking outside a group, posted and completed by collieGroupEnd inside one. */
COLLIE_API collieResult_t collieSend(const void* sendbuff, size_t count, collieDataType_t datatype,
                                     int peer, collieComm_t comm, void* stream);
COLLIE_API collieResult_t collieRecv(void* recvbuff, size_t count, collieDataType_t datatype,
                                     int peer, collieComm_t comm, void* stream);
/* With a tag (>= 0): messages match on peer and tag, in order per pair and tag. */
COLLIE_API collieResult_t collieSendTagged(const void* sendbuff, size_t count,
                                           collieDataType_t datatype, int peer, int tag,
                                           collieComm_t comm, void* stream);
COLLIE_API collieResult_t collieRecvTagged(void* recvbuff, size_t count, collieDataType_t datatype,
                                           int peer, int tag, collieComm_t comm, void* stream);
/* Takes the first message with this tag from any peer and reports its rank in *peer. Blocking;
 * not allowed inside a group. */
COLLIE_API collieResult_t collieRecvAny(void* recvbuff, size_t count, collieDataType_t datatype,
                                        int tag, int* peer, collieComm_t comm, void* stream);

/* Everything called between these on this thread, on one or several communicators, is posted
 * at collieGroupEnd and progresses together; collieGroupEnd returns when all of it is complete,
 * with results as if issued in order. Groups nest: the outermost collieGroupEnd runs them. A
 * ring of grouped sends and receives never deadlocks. */
COLLIE_API collieResult_t collieGroupStart(void);
COLLIE_API collieResult_t collieGroupEnd(void);

/* Forces an algorithm for the following collectives of this communicator ("ring", "tree",
 * ...; NULL or "auto" gives the choice back to the tuner), as COLLIE_ALGO does at init. Call
 * it on every rank at the same point between collectives. A collective the forced algorithm
 * cannot run fails with collieInvalidArgument. */
COLLIE_API collieResult_t collieCommSetAlgorithm(collieComm_t comm, const char* name);

/* The name of the algorithm the last collective issued on this communicator ran ("" before
 * the first). The string is static. While the tuner tries the algorithms for a call shape new
 * to it (COLLIE_TUNER_TRIALS), the name is followed by " (trial)". */
COLLIE_API collieResult_t collieCommLastAlgorithm(collieComm_t comm, const char** name);

COLLIE_API const char* collieGetErrorString(collieResult_t result);

/* The message of the last error on this communicator (op, local rank, peer rank, what to do);
 * with comm == NULL, the last error of this thread outside any communicator (e.g. init). */
COLLIE_API const char* collieGetLastError(collieComm_t comm);

/* Where the scalar of a created reduction op lives, as NCCL numbers them. */
typedef enum {
  /* In device memory: read at each call that uses the op (builds with CUDA only). */
  collieScalarDevice = 0,
  /* In host memory: its value is copied before collieRedOpCreatePreMulSum returns. */
  collieScalarHostImmediate = 1
} collieScalarResidence_t;

/* Creates an op that multiplies each rank's input by *scalar (of datatype) before summing:
 * the result is sum over ranks of scalar * input. The op belongs to comm and to datatype: it
 * works with AllReduce, Reduce and ReduceScatter on comm with that datatype only. Op values
 * start at collieNumOps and are unique in the process, so one given to another communicator
 * is refused. Host buffers only so far. */
COLLIE_API collieResult_t collieRedOpCreatePreMulSum(collieRedOp_t* op, void* scalar,
                                                     collieDataType_t datatype,
                                                     collieScalarResidence_t residence,
                                                     collieComm_t comm);
/* Frees an op made by collieRedOpCreatePreMulSum on comm. Calls that were given the op and
 * have returned (a group's or an asynchronous call's included) still run with it. */
COLLIE_API collieResult_t collieRedOpDestroy(collieRedOp_t op, collieComm_t comm);

/* ---- Per-communicator configuration, finalize, non-blocking communicators ---- */

/* A field left at its UNDEF value takes its environment variable's value (or its default). */
#define COLLIE_CONFIG_UNDEF_INT INT_MIN
#define COLLIE_CONFIG_UNDEF_PTR NULL
#define COLLIE_CONFIG_MAGIC 0xc011e0cfu

/* A communicator's settings, read at init: each field set overrides its environment variable
 * for this communicator only. Fields are only ever appended: size, magic and version (the
 * COLLIE_VERSION_CODE of the header it was built with) let a library read a config from an
 * older or newer header. Always start from COLLIE_CONFIG_INITIALIZER. */
typedef struct collieConfig_v100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;             /* 1 (default): init and ops return when done; 0: see below */
  int timeoutMs;            /* COLLIE_TIMEOUT_MS: deadline of every wait, >= 1 */
  int connectTimeoutMs;     /* COLLIE_CONNECT_TIMEOUT_MS: deadline of init, >= 1 */
  int nsocks;               /* COLLIE_NSOCKS: TCP sockets per peer, 0 (auto) to 64 */
  int chunkBytes;           /* COLLIE_CHUNK_BYTES: pipeline chunk, >= 4096 */
  const char* commName;     /* named in this communicator's log lines and error messages */
  const char* socketIfname; /* COLLIE_SOCKET_IFNAME: interface the TCP transport listens on */
  const char* transports;   /* COLLIE_TRANSPORT: comma list of tcp, shm, ucx */
  const char* algorithm;    /* COLLIE_ALGO: forced algorithm name, or "auto" */
} collieConfig_t;

#define COLLIE_CONFIG_INITIALIZER                                                              \
  {                                                                                            \
    sizeof(collieConfig_t), COLLIE_CONFIG_MAGIC, COLLIE_VERSION_CODE, COLLIE_CONFIG_UNDEF_INT, \
        COLLIE_CONFIG_UNDEF_INT, COLLIE_CONFIG_UNDEF_INT, COLLIE_CONFIG_UNDEF_INT,             \
        COLLIE_CONFIG_UNDEF_INT, COLLIE_CONFIG_UNDEF_PTR, COLLIE_CONFIG_UNDEF_PTR,             \
        COLLIE_CONFIG_UNDEF_PTR, COLLIE_CONFIG_UNDEF_PTR                                       \
  }

/* collieCommInitRank with a config (NULL: the environment alone). The config is read before
 * it returns. A bad field is collieInvalidArgument naming it.
 * Non-blocking (blocking = 0): returns collieInProgress at once with *comm set while init goes
 * on in the background; poll collieCommGetAsyncError until it is no longer collieInProgress
 * before any other call on comm (until then they fail with collieInvalidUsage). Collectives,
 * point-to-point calls and collieGroupEnd on such a communicator then return collieInProgress
 * and run in call order in the background; collieCommGetAsyncError says collieInProgress while
 * any is in flight, then collieSuccess or the first error. collieCommAbort and
 * collieCommDestroy during init return at once; the init ends in the background. */
COLLIE_API collieResult_t collieCommInitRankConfig(collieComm_t* comm, int nranks,
                                                   collieUniqueId commId, int rank,
                                                   collieConfig_t* config);

/* Completes every operation issued on comm and refuses new ones (collieInvalidUsage); then
 * collieCommDestroy frees it. Blocking communicator: returns when all is done, with the first
 * error; non-blocking: returns collieInProgress, and collieCommGetAsyncError says when done. */
COLLIE_API collieResult_t collieCommFinalize(collieComm_t comm);

/* Collective over comm: the ranks that pass one color (>= 0) make a new communicator, ranked by
 * key (ties by their rank in comm); COLLIE_SPLIT_NOCOLOR makes none (*newcomm is NULL). The new
 * communicator talks over comm's connections (no store, no new socket or segment) and lives on
 * after comm is destroyed, in any order. config: its settings, each field set over the
 * environment (NULL: comm's settings). A non-blocking child (its config, or comm's without one,
 * says blocking = 0) returns collieInProgress with *newcomm set: poll its
 * collieCommGetAsyncError, and make no other call on comm until then. Not inside a group. */
COLLIE_API collieResult_t collieCommSplit(collieComm_t comm, int color, int key,
                                          collieComm_t* newcomm, collieConfig_t* config);

#ifdef __cplusplus
}
#endif

#endif /* COLLIE_COLLIE_H_ */
