// A chunked point-to-point schedule for one rank and the executor that runs it. An algorithm
// builds the ordered receives and sends of its rank (the rank arithmetic lives in patterns/);
// the executor posts receives up to a window ahead, reduces or copies each one as it lands, and
// posts each send as soon as the receive it forwards has been processed, so chunk k+1 travels
// while chunk k is reduced. Frames to and from one peer are matched by their order on that
// connection: the builder must list, for every pair of ranks, the sends of one in the same order
// as the receives of the other.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/algorithm.h"

namespace collie {

struct ScheduleRecv {
  int peer = -1;
  // Where the frame lands; nullptr = a staging slot of the executor (the slot stays untouched
  // until every send that forwards it has completed).
  char* dst = nullptr;
  size_t bytes = 0;
  // After arrival, when with != nullptr: out = landed (op) with, element-wise (out nullptr = the
  // landing place); when with is nullptr and out != nullptr: the landed bytes are copied to out.
  // out may be the landing place or with itself.
  const char* with = nullptr;
  char* out = nullptr;
  bool landedFirst = true;  // the operand order of the reduction (matters for bit-exact floats)
  bool finalAvg = false;    // out is final: divide it by nranks (avg)
};

struct ScheduleSend {
  int peer = -1;
  // nullptr = the landing place of receive dep (its slot when staged).
  const char* src = nullptr;
  size_t bytes = 0;
  int dep = -1;  // index of the receive that must be processed before this send goes out
  // Posted only once every earlier send has completed: the first send of a step that talks to
  // a new peer, so that it never takes link bandwidth from the previous step's sends, which
  // that step's partner waits for.
  bool afterSends = false;
};

struct ChunkSchedule {
  std::vector<ScheduleRecv> recvs;
  std::vector<ScheduleSend> sends;
  // Local work done before anything is posted (e.g. the own block of an out-of-place gather).
  struct Copy {
    char* dst;
    const char* src;
    size_t bytes;
  };
  std::vector<Copy> copiesFirst;
  // Staging slots at least (the executor has a few of its own). A slot is landed in again only
  // once the sends forwarding it are done, and a send to a peer may complete only once that
  // peer has posted the receive: a ring that forwards staged chunks one step later needs a slot
  // per chunk of a step, or every rank waits for its successor.
  size_t minSlots = 0;
};

// Runs s for the collective a on ctx's connections; frames carry algoId.
Status runChunkSchedule(const ChunkSchedule& s, const CollArgs& a, AlgoContext& ctx,
                        uint8_t algoId);

// Splits [0, bytes) into chunks of at most chunkBytes, whole elements each; at least one chunk
// (an empty one when bytes == 0) so that every rank's schedule has the same frames.
struct ChunkSpan {
  size_t off, bytes;
};
std::vector<ChunkSpan> splitChunks(size_t bytes, size_t chunkBytes, size_t esz);

}  // namespace collie
