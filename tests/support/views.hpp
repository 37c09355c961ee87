// Which of an owner's views may be taken from a value of type Owner: Owner& or Owner const& for a
// named owner, plain Owner for a temporary, whose memory is gone by the end of the statement.
#pragma once

#include <cstddef>
#include <utility>

namespace test_support {

template <class Owner>
concept gives_data = requires { std::declval<Owner>().data(); };

template <class Owner>
concept gives_span = requires { std::declval<Owner>().span(); };

template <class Owner>
concept gives_iterators = requires { std::declval<Owner>().begin(); } || requires { std::declval<Owner>().end(); };

template <class Owner>
concept gives_element = requires { std::declval<Owner>()[std::size_t{0}]; };

template <class Owner>
concept gives_range = requires { std::declval<Owner>().range(); } ||
                      requires { std::declval<Owner>().range(std::size_t{0}, std::size_t{1}); };

template <class Owner>
concept gives_allocation = requires { std::declval<Owner>().allocation(); };

template <class Owner>
concept gives_address = requires {
  std::declval<Owner>().address();
};

template <class Owner>
concept gives_base = requires {
  std::declval<Owner>().base();
};

}  // namespace test_support
