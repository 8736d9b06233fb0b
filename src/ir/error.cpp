#include "fx/error.h"

namespace fx {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
#define FX_ERROR_CASE(name, str) \
  case ErrorKind::name:          \
    return str;
    FX_ERROR_KINDS(FX_ERROR_CASE)
#undef FX_ERROR_CASE
  }
  return "Error";
}

}  // namespace fx
