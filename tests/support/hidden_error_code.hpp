// A shared library built with -fvisibility=hidden, as libraries that use hipxx in their own
// implementation often are, that hands its caller a std::error_code it made with hipxx.
#pragma once

#include <system_error>

[[gnu::visibility("default")]] std::error_code invalid_value_from_hidden_library();
