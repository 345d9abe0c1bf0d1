/* Transitional: the JSON writer lives in lib/core/json.h (removed once lib/master settles). */
#include "core/json.h"
