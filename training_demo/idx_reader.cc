// IDX parsing on top of zlib's gz* interface, which reads gzip'd and plain files alike.
#include "training_demo/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace collie {
namespace train {
namespace {

// Far above any IDX file in use (Fashion-MNIST's training images are 47 MB): a guard against
// a corrupt header asking for gigabytes.
constexpr uint64_t kMaxPayload = 1ULL << 31;

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

Status readAll(const std::string& path, std::vector<uint8_t>* out) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    return Status::error("cannot open " + path + ": " +
                         (errno ? std::strerror(errno) : "out of memory"));
  }
  out->clear();
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    const int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) break;
    out->insert(out->end(), chunk.begin(), chunk.begin() + n);
    if (n == 0 || out->size() > kMaxPayload) break;
  }
  int code = Z_OK;
  const char* why = gzerror(f, &code);
  std::string message = why ? why : "";
  gzclose(f);
  if (code != Z_OK && code != Z_STREAM_END) {
    return Status::error(path + " is corrupt (gzip: " + message +
                         "); reinstall it, e.g. apt-get install --reinstall dataset-fashion-mnist");
  }
  return Status();
}

uint32_t bigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

Status readIdx(const std::string& path, int expectDims, IdxArray* out) {
  std::vector<uint8_t> bytes;
  COLLIE_TRAIN_RETURN_IF_ERROR(readAll(path, &bytes));
  const std::string what = path + " is not an IDX file of unsigned bytes: ";
  if (bytes.size() < 4) return Status::error(what + "shorter than its 4-byte magic");
  if (bytes[0] != 0 || bytes[1] != 0) return Status::error(what + "bad magic");
  if (bytes[2] != 0x08) return Status::error(what + "element type is not 0x08 (unsigned byte)");
  if (bytes[3] != expectDims) {
    return Status::error(what + "has " + std::to_string(bytes[3]) + " dimensions, expected " +
                         std::to_string(expectDims));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(expectDims);
  if (bytes.size() < header) return Status::error(what + "truncated header");
  out->dims.clear();
  uint64_t payload = 1;
  for (int d = 0; d < expectDims; ++d) {
    out->dims.push_back(bigEndian32(bytes.data() + 4 + 4 * d));
    payload *= out->dims.back();
    if (payload > kMaxPayload) return Status::error(what + "dimensions too large");
  }
  if (bytes.size() - header != payload) {
    return Status::error(path + " is corrupt: the header promises " + std::to_string(payload) +
                         " bytes of data, the file has " + std::to_string(bytes.size() - header) +
                         (bytes.size() - header < payload ? " (truncated)" : " (trailing data)"));
  }
  out->data.assign(bytes.begin() + header, bytes.end());
  return Status();
}

std::string imagesFile(const std::string& dir, const std::string& prefix) {
  return dir + "/" + prefix + "-images-idx3-ubyte";
}
std::string labelsFile(const std::string& dir, const std::string& prefix) {
  return dir + "/" + prefix + "-labels-idx1-ubyte";
}

Status loadSplit(const std::string& dir, const std::string& prefix, int maxClasses, Dataset* out) {
  std::string images = imagesFile(dir, prefix), labels = labelsFile(dir, prefix);
  for (std::string* p : {&images, &labels}) {
    if (exists(*p + ".gz")) {
      *p += ".gz";
    } else if (!exists(*p)) {
      return Status::error("missing " + *p +
                           ".gz: install the data set (apt-get install "
                           "dataset-fashion-mnist, or make demo) or point --data at a folder "
                           "holding the four IDX files of Fashion-MNIST or MNIST");
    }
  }
  IdxArray img, lab;
  COLLIE_TRAIN_RETURN_IF_ERROR(readIdx(images, 3, &img));
  COLLIE_TRAIN_RETURN_IF_ERROR(readIdx(labels, 1, &lab));
  if (img.dims[0] != lab.dims[0]) {
    return Status::error(images + " holds " + std::to_string(img.dims[0]) + " images but " +
                         labels + " holds " + std::to_string(lab.dims[0]) + " labels");
  }
  if (img.dims[0] == 0 || img.dims[1] == 0 || img.dims[2] == 0) {
    return Status::error(images + " holds no pixels");
  }
  for (uint8_t l : lab.data) {
    if (l >= maxClasses) {
      return Status::error(labels + " has label " + std::to_string(l) + ", expected below " +
                           std::to_string(maxClasses));
    }
  }
  out->count = img.dims[0];
  out->rows = img.dims[1];
  out->cols = img.dims[2];
  out->pixels = std::move(img.data);
  out->labels = std::move(lab.data);
  return Status();
}

}  // namespace train
}  // namespace collie
