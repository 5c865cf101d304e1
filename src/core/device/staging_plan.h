// How a collective on device buffers is cut into chunks that a host schedule runs on a pinned
// staging buffer: per chunk, the strided copy that brings this rank's part of the input down,
// where the host collective's send and recv lie in the staging buffer, and the strided copy
// that takes the result back up. Kept free of CUDA so that the arithmetic is tested where no
// GPU is; DeviceStaging turns each Copy2D into one cudaMemcpy2DAsync.
//
// Per collective (c = count, p = the chunk's elements, chunk k starts at element k * perChunk):
//   allreduce, reduce, broadcast: send[k] -> staging -> recv[k], the host op in place;
//     reduce has no copy up off the root, broadcast no copy down off the root;
//   allgather: send[k] -> staging[rank * p]; the host allgather in place (send inside recv);
//     up: staging[q * p] -> recv[q * c + k] for every rank q;
//   reducescatter: down: send[q * c + k] -> staging[q * p] for every rank q; the host
//     reducescatter in place (recv = staging[rank * p]); up: staging[rank * p] -> recv[k].
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"

namespace collie {

// A strided copy in bytes: height rows of width bytes, rows pitch bytes apart on each side.
struct Copy2D {
  bool active = false;
  size_t srcOffset = 0, srcPitch = 0;
  size_t dstOffset = 0, dstPitch = 0;
  size_t width = 0, height = 0;
};

struct StagedChunk {
  size_t hostCount = 0;  // the count the host collective runs with
  // Offsets in the staging buffer of the host collective's send and recv; SIZE_MAX: null
  // (a buffer the collective does not use on this rank).
  size_t hostSend = 0, hostRecv = 0;
  Copy2D down;  // user send -> staging
  Copy2D up;    // staging -> user recv
};

// Elements per chunk for a staging buffer of stagingBytes; 0 when it cannot hold one element
// per rank.
size_t stagingPerChunk(Collective coll, size_t elemSize, int nranks, size_t stagingBytes);

size_t stagingChunks(size_t count, size_t perChunk);

// Chunk k of args (args.count as the collective's count argument) on rank of nranks.
StagedChunk stagedChunk(const CollArgs& args, int rank, int nranks, size_t perChunk, size_t k);

constexpr size_t kNoBuffer = static_cast<size_t>(-1);

}  // namespace collie
