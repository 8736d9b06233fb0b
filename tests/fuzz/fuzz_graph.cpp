// libFuzzer target: graph building from op sequences (graph_bytes.h), then lint, printing,
// Python code generation, DCE and CSE on a GraphModule of it.
#include "fx/fx.h"
#include "graph_bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* p = data;
  try {
    std::unique_ptr<fx::Graph> g = fxfuzz::graph_from_bytes(p, data + size, 64);
    fx::Node* last = nullptr;
    for (fx::Node* n : g->nodes()) last = n;
    if (last) g->output(last);
    g->lint();
    (void)g->str();
    (void)g->tabular();
    (void)g->python_code();
    fx::GraphModule gm(nullptr, std::move(g), "Fuzz");
    fx::eliminate_dead_code(gm);
    fx::cse(gm);
    gm.graph().lint();
  } catch (const fx::Error&) {
  }
  return 0;
}
