// Reading a setting's value (an environment variable, say) as a whole number within bounds.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>

namespace hipxx::core {

// `text` as a whole number from `least` to `most`, all of it digits (no sign, space or suffix).
[[nodiscard]] inline std::optional<long> whole_number(std::string_view text, long least, long most) noexcept {
  long value = 0;
  const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (code != std::errc{} || end != text.data() + text.size() || value < least || value > most) return std::nullopt;
  return value;
}

}  // namespace hipxx::core
