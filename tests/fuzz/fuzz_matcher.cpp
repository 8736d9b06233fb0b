// libFuzzer target: the subgraph matcher and replace_pattern on a graph and a pattern both
// built from the bytes (graph_bytes.h): the first byte splits them.
#include "fx/fx.h"
#include "fx/subgraph_rewriter.h"
#include "graph_bytes.h"

namespace {
std::unique_ptr<fx::Graph> closed(const uint8_t*& p, const uint8_t* end, size_t ops) {
  std::unique_ptr<fx::Graph> g = fxfuzz::graph_from_bytes(p, end, ops);
  fx::Node* last = nullptr;
  for (fx::Node* n : g->nodes()) last = n;
  if (last) g->output(last);
  return g;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t split = 1 + data[0] % (size - 1);
  const uint8_t* p = data + 1;
  try {
    std::unique_ptr<fx::Graph> graph = closed(p, data + split, 48);
    p = data + split;
    std::unique_ptr<fx::Graph> pattern = closed(p, data + size, 8);
    fx::SubgraphMatcher m(*pattern, size % 2 == 0, size % 3 == 0, size % 5 != 0);
    (void)m.match(*graph);
    const uint8_t* q = data + split;
    std::unique_ptr<fx::Graph> replacement = closed(q, data + size, 4);
    fx::GraphModule gm(nullptr, std::move(graph), "Fuzz");
    (void)fx::replace_pattern(gm, *pattern, *replacement);
    gm.graph().lint();
  } catch (const fx::Error&) {
  }
  return 0;
}
