// Failed checks on hipxx::result<T> and std::error_code print the error's message, not "{?}".
#pragma once

#include <doctest/doctest.h>

#include <hipxx/error.hpp>

#include <string>
#include <system_error>

template <class T, class Policy>
struct doctest::StringMaker<boost::outcome_v2::basic_result<T, std::error_code, Policy>> {
  static doctest::String convert(boost::outcome_v2::basic_result<T, std::error_code, Policy> const& value) {
    if (value.has_value()) {
      return "success";
    }
    return ("failure: " + value.error().message()).c_str();
  }
};

template <>
struct doctest::StringMaker<std::error_code> {
  static doctest::String convert(std::error_code const& code) {
    return (std::string(code.category().name()) + ":" + std::to_string(code.value()) + " " + code.message()).c_str();
  }
};
