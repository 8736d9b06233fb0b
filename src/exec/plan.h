// Internal to fx::exec: what the interpreter knows about each call_function target (the op
// registry's side of it).
#pragma once

#include <cstdint>

#include "fx/exec.h"

namespace fx::exec {

// What the interpreter loop needs to know about a call_function target, looked up once per
// function (functions are interned: their FunctionInfo lives as long as the process) and again
// after any registration.
struct TargetInfo {
  const OpFn* fn = nullptr;  // the implementation, or null
  bool getitem = false;
  bool clamp_producer = false;  // may take a following Relu/Clip into its output
  bool relu = false, clip = false;
  bool matmul = false, add = false, div = false, reduce_mean = false;
};

/// The facts about `f` (cached per thread until the next registration).
const TargetInfo& target_info(const Function& f);

}  // namespace fx::exec
