#include "kernels/scratch.h"

namespace fx::kernels {

namespace {
thread_local std::vector<float> t_scratch[static_cast<int>(Scratch::kCount)];
}  // namespace

std::vector<float>& scratch(Scratch slot) { return t_scratch[static_cast<int>(slot)]; }

void release_scratch() {
  for (std::vector<float>& v : t_scratch) std::vector<float>().swap(v);
}

}  // namespace fx::kernels
