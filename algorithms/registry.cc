// The one place algorithms are registered.
#include "algorithms/algorithm.h"

namespace collie {

std::vector<std::unique_ptr<Algorithm>> buildAlgorithms() {
  std::vector<std::unique_ptr<Algorithm>> algos;
  // In order of preference: the first usable one runs unless COLLIE_ALGO says otherwise.
  algos.push_back(makeShmDirectAlgorithm());
  algos.push_back(makeRingAlgorithm());
  return algos;
}

}  // namespace collie
