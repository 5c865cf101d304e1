// The one place algorithms are registered.
#include "algorithms/algorithm.h"

namespace collie {

std::vector<std::unique_ptr<Algorithm>> buildAlgorithms() {
  std::vector<std::unique_ptr<Algorithm>> algos;
  algos.push_back(makeRingAlgorithm());
  return algos;
}

}  // namespace collie
