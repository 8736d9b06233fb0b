// fxwasm — torch.fx in C++.
//
// A Graph is an ordered list of Nodes; each Node has one of six opcodes (placeholder, get_attr,
// call_function, call_module, call_method, output), a target, and args/kwargs that may refer to
// earlier nodes. Build one, print it exactly as torch.fx 1.13 prints, and generate Python:
//
//   fx::Graph g;
//   fx::Node* x = g.placeholder("x");
//   fx::Node* add = g.call_function(fx::fn("operator.add"), {x, 1});
//   fx::Node* relu = g.call_function(fx::fn("torch.relu"), {add});
//   g.output(relu);
//   g.str();        // graph():\n    %x : [#users=1] = placeholder[target=x]\n ...
//   g.tabular();    // print_tabular()
//   g.python_code().src;   // def forward(self, x):\n    add = x + 1;  x = None ...
//
// Mutate it like torch.fx: inserting_before/after, replace_all_uses_with, erase_node,
// eliminate_dead_code, lint. A GraphModule owns a graph plus an attribute tree of
// parameters, buffers and submodules, and keeps the generated code (`code()`).
//
// Errors are fx::Error with a kind (error.h); the library never aborts on user input.
#pragma once

#include "fx/argument.h"
#include "fx/error.h"
#include "fx/function.h"
#include "fx/graph.h"
#include "fx/graph_module.h"
#include "fx/limits.h"
#include "fx/namespace.h"
#include "fx/node.h"
#include "fx/pass_manager.h"
#include "fx/passes.h"
#include "fx/subgraph_rewriter.h"
