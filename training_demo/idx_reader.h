// Reads the IDX files of MNIST and Fashion-MNIST (train-images-idx3-ubyte.gz and friends),
// gzip'd or not, into memory, with errors that name the file and what is wrong with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "training_demo/status.h"

namespace collie {
namespace train {

// One IDX file of unsigned bytes: its dimensions and its payload.
struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
};

// Reads path (gzip'd or plain, zlib tells them apart) and checks the header: magic 0 0,
// type 0x08 (unsigned byte), expectDims dimensions, payload exactly the product of them.
Status readIdx(const std::string& path, int expectDims, IdxArray* out);

// Images and labels of one split. Pixels are kept as bytes (a quarter of the memory of floats)
// and normalised when a batch is gathered.
struct Dataset {
  uint32_t count = 0;
  uint32_t rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols
  std::vector<uint8_t> labels;  // count
  int pixelsPerImage() const { return static_cast<int>(rows * cols); }
};

// The standard file names of a split: prefix "train" or "t10k".
std::string imagesFile(const std::string& dir, const std::string& prefix);
std::string labelsFile(const std::string& dir, const std::string& prefix);

// Loads a split from dir, trying "<name>.gz" then "<name>"; images and labels must agree in
// count, and every label must be below maxClasses.
Status loadSplit(const std::string& dir, const std::string& prefix, int maxClasses, Dataset* out);

// The default data folder (Debian package dataset-fashion-mnist).
constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

}  // namespace train
}  // namespace collie
