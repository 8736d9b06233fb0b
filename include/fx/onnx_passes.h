// Moved to fx/exec/passes.h (its namespace is fx::exec); kept so that existing includes build.
#pragma once

#include "fx/exec/passes.h"
