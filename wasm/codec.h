// wasm/codec.h — the tagged-text value format in which argument values cross the JS boundary
// (the JS half is wasm/codec.mjs), so 1 vs 1.0, tuple vs list, dtype, device, slice... all
// survive the round trip exactly. Parsed without recursion deeper than kMaxDepth.
//
// A value is one token; tokens are self-delimiting and written back to back:
//   N  None            T / F  True / False        E  Ellipsis
//   i<int64>;          d<float>;   (strtod / JS Number syntax: 1.5, -0, 1e-7, Infinity, NaN)
//   C<re>;<im>;        complex
//   s"json string"     str
//   ( ... )  tuple     [ ... ]  list      { k v k v ... }  dict (any key kind)
//   S<start><stop><step>  slice          D"float32"  dtype       L"strided"  layout
//   V"cuda"<index: i..; or N>  device    M"channels_last"  memory format
//   #<graph id>:<node id>;  a Node
#pragma once

#include <string>
#include <vector>

#include "fx/fx.h"

namespace fxwasm {

/// Arguments nested deeper than this are rejected (no input-dependent unbounded recursion);
/// wasm/codec.mjs has the same MAX_DEPTH.
constexpr int kMaxDepth = 256;

/// Parses one value. `target`: the graph Node tokens must belong to (nullptr: Node tokens are
/// rejected). `what` starts every error message. Throws fx::Error (Value for malformed text,
/// too deep nesting and bad names; Type for unhashable keys; StaleHandle / Graph for bad Nodes).
fx::Argument decode(const std::string& s, fx::Graph* target, const char* what);
/// A list or tuple's elements.
std::vector<fx::Argument> decode_args(const std::string& s, fx::Graph* target, const char* what);
/// A dict with string keys; "" is no kwargs.
fx::Kwargs decode_kwargs(const std::string& s, fx::Graph* target, const char* what);

/// Appends `s` as a JSON string literal.
void encode_string(const std::string& s, std::string& out);
/// Appends the token of `a` (Nodes as #<graph id>:<node id>;).
void encode(const fx::Argument& a, std::string& out, int depth = 0);
/// The token of `a`.
std::string encode(const fx::Argument& a);
/// `items` as a list token.
std::string encode_items(const std::vector<fx::Argument>& items);
/// `kw` as a dict token with string keys.
std::string encode_kwargs(const fx::Kwargs& kw);

}  // namespace fxwasm
