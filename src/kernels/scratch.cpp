#include "kernels/scratch.h"

namespace fx::kernels {

namespace {
thread_local ScratchBuffer t_scratch[static_cast<int>(Scratch::kCount)];
}  // namespace

ScratchBuffer& scratch(Scratch slot) { return t_scratch[static_cast<int>(slot)]; }

void release_scratch() {
  for (ScratchBuffer& v : t_scratch) ScratchBuffer().swap(v);
}

}  // namespace fx::kernels
