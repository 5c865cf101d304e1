// The one place algorithms are registered.
#include "algorithms/algorithm.h"

namespace collie {

std::vector<std::unique_ptr<Algorithm>> buildAlgorithms() {
  std::vector<std::unique_ptr<Algorithm>> algos;
  // Ties in the cost model go to the earlier one.
  algos.push_back(makeShmDirectAlgorithm());
  algos.push_back(makeShmSingleCopyAlgorithm());
  algos.push_back(makeRecursiveDoublingAlgorithm());
  algos.push_back(makeRingAlgorithm());
  algos.push_back(makeTreeAlgorithm());
  algos.push_back(makeRhdAlgorithm());
  algos.push_back(makeHierarchicalAlgorithm());
  algos.push_back(makeDisseminationAlgorithm());
  algos.push_back(makePairwiseAlgorithm());
  algos.push_back(makeBruckAlgorithm());
  algos.push_back(makeLinearAlgorithm());
  algos.push_back(makeBinomialAlgorithm());
  return algos;
}

}  // namespace collie
