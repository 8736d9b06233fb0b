// Typed catch clauses in the threaded module (build/wasm-threads): Debian's emscripten 3.1.6
// compiles with Debian's clang 14, whose wasm exception lowering passes the landing pad to the
// personality function through a plain global, __wasm_lpad_context. Emscripten 3.1.6's
// libunwind declares that global thread_local (LLVM 15's convention), which in a -pthread link
// is a different address: the personality then never matches a handler, every
// `catch (const fx::Error&)` is skipped, and only catch (...) runs (the API reported
// "InternalError: unknown C++ exception" for every error). tests/js/threads_wasm.test.mjs checks
// typed errors.
//
// This file defines the global as clang 14 expects it, with libunwind's wasm entry points
// (Unwind-wasm.c, the same few lines) around it, so the archive's copy is never linked. A plain
// global is what the single-thread module has too; with threads it would be shared if two
// threads unwound at the same instant. Exceptions are thrown on the calling thread; a kernel on
// a pool thread does not throw (an allocation failure there would be the exception).
#include <unwind.h>

#include <cstdint>

#if defined(__EMSCRIPTEN__) && defined(__clang_major__) && __clang_major__ < 15

extern "C" {

_Unwind_Reason_Code __gxx_personality_wasm0(int version, _Unwind_Action actions,
                                            uint64_t exception_class, _Unwind_Exception* exception,
                                            _Unwind_Context* context);

struct _Unwind_LandingPadContext {
  uintptr_t lpad_index;  // in: the landing pad's index
  uintptr_t lsda;        // in: its language-specific data
  uintptr_t selector;    // out: the handler the personality chose
};
_Unwind_LandingPadContext __wasm_lpad_context;

_Unwind_Reason_Code _Unwind_CallPersonality(void* exception_ptr) {
  auto* e = static_cast<_Unwind_Exception*>(exception_ptr);
  __wasm_lpad_context.selector = 0;
  return __gxx_personality_wasm0(1, _UA_CLEANUP_PHASE, e->exception_class, e,
                                 reinterpret_cast<_Unwind_Context*>(&__wasm_lpad_context));
}

_Unwind_Reason_Code _Unwind_RaiseException(_Unwind_Exception* e) { __builtin_wasm_throw(0, e); }

void _Unwind_DeleteException(_Unwind_Exception* e) {
  if (e->exception_cleanup) e->exception_cleanup(_URC_FOREIGN_EXCEPTION_CAUGHT, e);
}

void _Unwind_SetGR(_Unwind_Context* context, int index, _Unwind_Word value) {
  if (index == 1) reinterpret_cast<_Unwind_LandingPadContext*>(context)->selector = value;
}

_Unwind_Word _Unwind_GetIP(_Unwind_Context* context) {
  // Used as a 1-based index after a decrement of 1.
  return reinterpret_cast<_Unwind_LandingPadContext*>(context)->lpad_index + 2;
}

void _Unwind_SetIP(_Unwind_Context*, _Unwind_Word) {}

void* _Unwind_GetLanguageSpecificData(_Unwind_Context* context) {
  return reinterpret_cast<void*>(reinterpret_cast<_Unwind_LandingPadContext*>(context)->lsda);
}

_Unwind_Ptr _Unwind_GetRegionStart(_Unwind_Context*) { return 0; }

}  // extern "C"

#endif
