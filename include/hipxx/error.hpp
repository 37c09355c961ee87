// Errors as values: every fallible hipxx call returns hipxx::result<T>, whose error is a
// std::error_code in the "hip" category carrying the hipError_t, or an errno in the system or
// generic category where the failure came from the OS (file descriptors, sockets).
// Callers who prefer exceptions call .value(), which throws std::system_error.
#pragma once

#include <hipxx/hip_runtime_api.h>

// Only the std::error_code flavour of Outcome: <boost/outcome.hpp> would also pull in
// Boost.System and the exception_ptr flavours, which we never use and every includer would pay for.
#include <boost/outcome/std_result.hpp>

#include <cerrno>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace hipxx {

namespace outcome = boost::outcome_v2;

// The default no-value policy for std::error_code makes .value() on a failure throw
// std::system_error(error()), so exceptions stay available without a second result type.
template <class T>
using result = outcome::std_result<T>;

namespace detail {

class HipCategory final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "hip"; }

  // Both the runtime's name and its sentence: the name is what people grep for in HIP's docs.
  [[nodiscard]] std::string message(int value) const override {
    auto const error = static_cast<hipError_t>(value);
    char const* const error_name = hipGetErrorName(error);
    char const* const text = hipGetErrorString(error);
    std::string out = error_name != nullptr ? error_name : "hipError";
    if (text != nullptr && *text != '\0') {
      out += ": ";
      out += text;
    }
    // A value the runtime does not know is named hipErrorUnknown: keep the number it was.
    if (error != hipErrorUnknown && error_name != nullptr && std::string_view{error_name} == "hipErrorUnknown") {
      out += " (value " + std::to_string(value) + ")";
    }
    return out;
  }

  // Lets portable code test `ec == std::errc::not_enough_memory` without knowing HIP's enum.
  [[nodiscard]] std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<hipError_t>(value)) {
      case hipErrorInvalidValue: return std::errc::invalid_argument;
      case hipErrorOutOfMemory: return std::errc::not_enough_memory;
      case hipErrorNotSupported: return std::errc::not_supported;
      default: return {value, *this};
    }
  }
};

}  // namespace detail

// One instance for the whole program: error_code compares categories by address. Default visibility,
// because a shared library built with -fvisibility=hidden would otherwise keep a category of its own,
// and its codes would equal no hipError_t in the program that called it.
[[nodiscard, gnu::visibility("default")]] inline std::error_category const& hip_category() noexcept {
  static detail::HipCategory const category;
  return category;
}

}  // namespace hipxx

template <>
struct std::is_error_code_enum<hipError_t> : std::true_type {};

// hipError_t lives in the global namespace, so std::error_code's converting constructor can only
// find make_error_code for it by argument-dependent lookup there, not in hipxx.
[[nodiscard]] inline std::error_code make_error_code(hipError_t error) noexcept {
  return {static_cast<int>(error), hipxx::hip_category()};
}

namespace hipxx {

// The same function, so that `hipxx::make_error_code` and plain ADL never disagree or collide.
using ::make_error_code;

// Outcome will not build a result<T> straight from a hipError_t (an unscoped enum also converts to
// an arithmetic T), so failures are spelled out.
[[nodiscard]] inline auto failure(hipError_t error) noexcept { return outcome::failure(make_error_code(error)); }

[[nodiscard]] inline auto failure(std::errc error) noexcept { return outcome::failure(std::make_error_code(error)); }

// Reads errno at the call, so call it straight after the failing system call.
[[nodiscard]] inline auto errno_failure() noexcept {
  return outcome::failure(std::error_code(errno, std::system_category()));
}

[[nodiscard]] inline result<void> check(hipError_t error) noexcept {
  if (error == hipSuccess) {
    return outcome::success();
  }
  return failure(error);
}

}  // namespace hipxx
