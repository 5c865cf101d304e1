// runDevCase (see device_cases.h).
#include "tests/gpu/multiproc/device_cases.h"

#include <algorithm>
#include <vector>

namespace collie {
namespace testing {
namespace {

// Rank r's input element i: small integers, exact in f32 however they are summed.
float inputOf(int r, size_t i) {
  return static_cast<float>((r + 1) * static_cast<int>(i % 13 + 1));
}

size_t sendElems(const DevCase& c, int n) {
  return c.coll == DevColl::kReduceScatter ? c.count * n : c.count;
}
size_t recvElems(const DevCase& c, int n) {
  return c.coll == DevColl::kAllGather ? c.count * n : c.count;
}

float reduced(const DevCase& c, int n, size_t i) {
  float v = inputOf(0, i);
  for (int q = 1; q < n; ++q) {
    const float x = inputOf(q, i);
    v = c.op == collieMax ? std::max(v, x) : c.op == collieMin ? std::min(v, x) : v + x;
  }
  return v;
}

std::vector<float> expected(const DevCase& c, int r, int n) {
  std::vector<float> want;
  switch (c.coll) {
    case DevColl::kReduceScatter:
      for (size_t i = 0; i < c.count; ++i) want.push_back(reduced(c, n, r * c.count + i));
      break;
    case DevColl::kAllGather:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < c.count; ++i) want.push_back(inputOf(q, i));
      break;
    case DevColl::kBroadcast:
      for (size_t i = 0; i < c.count; ++i) want.push_back(inputOf(c.root, i));
      break;
    default:
      for (size_t i = 0; i < c.count; ++i) want.push_back(reduced(c, n, i));
  }
  return want;
}

collieResult_t call(const DevCase& c, const void* send, void* recv, collieComm_t comm,
                    cudaStream_t st) {
  const auto t = collieFloat32;
  switch (c.coll) {
    case DevColl::kAllReduce:
      return collieAllReduce(send, recv, c.count, t, c.op, comm, st);
    case DevColl::kReduceScatter:
      return collieReduceScatter(send, recv, c.count, t, c.op, comm, st);
    case DevColl::kAllGather:
      return collieAllGather(send, recv, c.count, t, comm, st);
    case DevColl::kBroadcast:
      return collieBroadcast(send, recv, c.count, t, c.root, comm, st);
    default:
      return collieReduce(send, recv, c.count, t, c.op, c.root, comm, st);
  }
}

std::string compare(const std::vector<float>& want, const std::vector<float>& got) {
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(want[i]);
  return "";
}

}  // namespace

const char* devCollName(DevColl c) {
  switch (c) {
    case DevColl::kAllReduce:
      return "allreduce";
    case DevColl::kReduceScatter:
      return "reducescatter";
    case DevColl::kAllGather:
      return "allgather";
    case DevColl::kBroadcast:
      return "broadcast";
    default:
      return "reduce";
  }
}

std::string runDevCase(const DevCase& c, collieComm_t comm, int rank, int nranks, int device,
                       cudaStream_t st) {
  const std::string what = std::string(devCollName(c.coll)) + " count " + std::to_string(c.count) +
                           (c.inPlace ? " in place" : "") + ": ";
  const size_t sn = sendElems(c, nranks), rn = recvElems(c, nranks), window = std::max(sn, rn);
  std::vector<float> in(sn), got(window);
  for (size_t i = 0; i < sn; ++i) in[i] = inputOf(rank, i);
  int current = -1;
  cudaGetDevice(&current);
  float *sendBuf = nullptr, *recvBuf = nullptr;
  cudaSetDevice(device);
  cudaMalloc(reinterpret_cast<void**>(&sendBuf), std::max<size_t>(sn, 1) * 4);
  cudaMalloc(reinterpret_cast<void**>(&recvBuf), std::max<size_t>(window, 1) * 4);
  cudaSetDevice(current);
  if (sendBuf == nullptr || recvBuf == nullptr) return what + "cudaMalloc failed";
  // The in-place layouts: the input inside the output (allgather), the output inside the input
  // (reducescatter), else one buffer.
  float* send = sendBuf;
  float* recv = recvBuf;
  if (c.inPlace && c.coll == DevColl::kAllGather) send = recvBuf + rank * c.count;
  if (c.inPlace && c.coll == DevColl::kReduceScatter) recv = sendBuf + rank * c.count;
  if (c.inPlace && c.coll != DevColl::kAllGather && c.coll != DevColl::kReduceScatter)
    recv = sendBuf;
  // Earlier work on the stream that the op must wait for: poison the output, then the input.
  std::string err;
  if (cudaMemsetAsync(recvBuf, 0xff, window * 4, st) != cudaSuccess ||
      cudaMemcpyAsync(send, in.data(), sn * 4, cudaMemcpyHostToDevice, st) != cudaSuccess)
    err = what + "staging the input failed";
  if (err.empty() && call(c, send, recv, comm, st) != collieSuccess)
    err = what + "call failed: " + collieGetLastError(comm);
  const size_t outN = c.coll == DevColl::kAllGather ? rn : c.count;
  if (err.empty() &&
      (cudaMemcpyAsync(got.data(), recv, outN * 4, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
       cudaStreamSynchronize(st) != cudaSuccess))
    err = what + "reading the output back failed";
  if (err.empty() && (c.coll != DevColl::kReduce || rank == c.root)) {
    got.resize(outN);
    std::string bad = compare(expected(c, rank, nranks), got);
    if (!bad.empty()) err = what + bad;
  }
  cudaFree(sendBuf);
  cudaFree(recvBuf);
  return err;
}

}  // namespace testing
}  // namespace collie
