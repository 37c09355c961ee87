#include "hidden_error_code.hpp"

#include <hipxx/error.hpp>

std::error_code invalid_value_from_hidden_library() { return make_error_code(hipErrorInvalidValue); }
