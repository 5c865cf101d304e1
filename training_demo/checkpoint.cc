// The checkpoint file format and its atomic write.
//
// Layout (little-endian): "COLLIECK", u32 version, u32 config length, config bytes, u32 epoch,
// u64 step in epoch, u64 global step, 4 x u64 RNG state, u64 n, n x f32 parameters, u64 m,
// m x f32 momentum, u32 CRC-32 of every byte before it.
#include "training_demo/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace collie {
namespace train {
namespace {

constexpr char kMagic[8] = {'C', 'O', 'L', 'L', 'I', 'E', 'C', 'K'};
constexpr uint32_t kVersion = 1;

class Writer {
 public:
  void bytes(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void floats(const std::vector<float>& v) {
    u64(v.size());
    for (float f : v) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      u32(bits);
    }
  }
  std::vector<uint8_t>& data() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool bytes(void* out, size_t n) {
    if (n_ - pos_ < n) return false;
    std::memcpy(out, p_ + pos_, n);
    pos_ += n;
    return true;
  }
  bool u32(uint32_t* v) {
    uint64_t w;
    if (!uint(4, &w)) return false;
    *v = static_cast<uint32_t>(w);
    return true;
  }
  bool u64(uint64_t* v) { return uint(8, v); }
  bool floats(std::vector<float>* v) {
    uint64_t n;
    if (!u64(&n) || n > (n_ - pos_) / 4) return false;
    v->resize(n);
    for (float& f : *v) {
      uint32_t bits = 0;
      u32(&bits);
      std::memcpy(&f, &bits, 4);
    }
    return true;
  }
  size_t remaining() const { return n_ - pos_; }

 private:
  bool uint(int width, uint64_t* v) {
    if (n_ - pos_ < static_cast<size_t>(width)) return false;
    *v = 0;
    for (int i = 0; i < width; ++i) *v |= uint64_t{p_[pos_ + i]} << (8 * i);
    pos_ += width;
    return true;
  }
  const uint8_t* p_;
  size_t n_, pos_ = 0;
};

std::string errnoText() { return std::strerror(errno); }

Status makeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string prefix = dir.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::error("cannot create checkpoint folder " + prefix + ": " + errnoText());
    }
  }
  return Status();
}

Status writeFileSynced(const std::string& path, const std::vector<uint8_t>& data) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error("cannot create " + path + ": " + errnoText());
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = errnoText();
      close(fd);
      return Status::error("cannot write " + path + ": " + why);
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const std::string why = errnoText();
    close(fd);
    return Status::error("cannot fsync " + path + ": " + why);
  }
  if (close(fd) != 0) return Status::error("cannot close " + path + ": " + errnoText());
  return Status();
}

std::map<std::string, std::string> parseConfig(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

}  // namespace

std::string checkpointPath(const std::string& dir) { return dir + "/checkpoint.bin"; }

Status saveCheckpoint(const std::string& dir, const TrainState& s) {
  COLLIE_TRAIN_RETURN_IF_ERROR(makeDirs(dir));
  Writer w;
  w.bytes(kMagic, sizeof(kMagic));
  w.u32(kVersion);
  w.u32(static_cast<uint32_t>(s.config.size()));
  w.bytes(s.config.data(), s.config.size());
  w.u32(s.epoch);
  w.u64(s.stepInEpoch);
  w.u64(s.globalStep);
  for (uint64_t word : s.rng) w.u64(word);
  w.floats(s.params);
  w.floats(s.velocity);
  w.u32(static_cast<uint32_t>(crc32(0L, w.data().data(), static_cast<uInt>(w.data().size()))));
  const std::string path = checkpointPath(dir), tmp = path + ".tmp";
  COLLIE_TRAIN_RETURN_IF_ERROR(writeFileSynced(tmp, w.data()));
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::error("cannot rename " + tmp + " to " + path + ": " + errnoText());
  }
  // The rename is durable only once the folder's entry is on disk.
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return Status();
}

Status loadCheckpoint(const std::string& path, TrainState* s) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot open checkpoint " + path + ": " + errnoText());
  const std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  const std::string corrupt = "checkpoint " + path + " is corrupt: ";
  if (data.size() < sizeof(kMagic) + 8 || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::error("checkpoint " + path + " is not a collie-train checkpoint (bad magic)");
  }
  Reader tail(data.data() + data.size() - 4, 4);
  uint32_t stored;
  tail.u32(&stored);
  const uint32_t actual =
      static_cast<uint32_t>(crc32(0L, data.data(), static_cast<uInt>(data.size() - 4)));
  if (stored != actual) {
    return Status::error(corrupt +
                         "checksum mismatch (truncated or damaged); delete it or "
                         "resume from another copy");
  }
  Reader r(data.data() + sizeof(kMagic), data.size() - sizeof(kMagic) - 4);
  uint32_t version = 0, configLen = 0;
  if (!r.u32(&version) || version != kVersion) {
    return Status::error("checkpoint " + path + " has format version " + std::to_string(version) +
                         ", this collie-train reads version " + std::to_string(kVersion));
  }
  bool ok = r.u32(&configLen) && configLen <= r.remaining();
  if (ok) {
    s->config.resize(configLen);
    ok = r.bytes(&s->config[0], configLen);
  }
  ok = ok && r.u32(&s->epoch) && r.u64(&s->stepInEpoch) && r.u64(&s->globalStep);
  for (uint64_t& word : s->rng) ok = ok && r.u64(&word);
  ok = ok && r.floats(&s->params) && r.floats(&s->velocity) && r.remaining() == 0;
  if (!ok) return Status::error(corrupt + "its fields do not add up to its size");
  return Status();
}

Status compareConfig(const std::string& saved, const std::string& current,
                     const std::string& path) {
  const auto a = parseConfig(saved), b = parseConfig(current);
  std::string diff;
  for (const auto& [key, value] : b) {
    auto it = a.find(key);
    const std::string old = it == a.end() ? "(absent)" : it->second;
    if (old != value) diff += " " + key + " " + old + " -> " + value + ";";
  }
  for (const auto& [key, value] : a) {
    if (!b.count(key)) diff += " " + key + " " + value + " -> (absent);";
  }
  if (diff.empty()) return Status();
  diff.pop_back();
  return Status::error("checkpoint " + path + " was written with other settings:" + diff +
                       ". Resume with the same settings, or start afresh without --resume");
}

}  // namespace train
}  // namespace collie
