// Host callbacks in stream order: add_callback(stream, f) runs `f` on a runtime thread once all work
// enqueued on `stream` before it has finished, and holds later work until `f` returns.
//
// hipStreamAddCallback takes a function pointer and one void*, so the callable lives on the heap
// from the call until it has run. HIP runs every accepted callback exactly once, so the state is
// freed exactly once: by the callback after it ran, or here at once if the runtime refused it.
#pragma once

#include <hipxx/error.hpp>
#include <hipxx/stream.hpp>

#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

namespace hipxx {

// A callable is invoked once, as an rvalue (so one with move-only captures, or one whose call
// consumes it, works). It may take the stream's status: hipSuccess, or the error of earlier work.
template <class F>
concept stream_callback = std::move_constructible<F> &&(std::invocable<F, hipError_t> || std::invocable<F>);

namespace detail {

template <class State>
void run_stream_callback(hipStream_t /*stream*/, hipError_t status, void* data) noexcept {
  // Owned from here: freed when this returns, whatever the callable does.
  std::unique_ptr<State> const state{static_cast<State*>(data)};
  // noexcept: an exception cannot unwind through the runtime's C frames, so one that escapes the
  // callable terminates here, where the debugger can see whose it was.
  // Called directly rather than through std::invoke: no member pointer is ever invocable with these
  // arguments, and <functional> is a heavy include for every user of this header.
  if constexpr (std::invocable<State, hipError_t>) {
    static_cast<void>(std::move(*state)(status));
  } else {
    static_cast<void>(std::move(*state)());
  }
}

}  // namespace detail

// Copies or moves `f` into the callback's state; a result it returns is dropped. May throw
// std::bad_alloc (for the state), never for the runtime's errors, which come back as the result.
// `f` must not let an exception out: it runs on a runtime thread with no caller to catch it, so one
// that escapes ends the program (std::terminate).
template <class F>
requires stream_callback<std::decay_t<F>> && std::constructible_from<std::decay_t<F>, F>
[[nodiscard]] result<void> add_callback(StreamRef stream, F&& f) {
  using State = std::decay_t<F>;
  auto state = std::make_unique<State>(std::forward<F>(f));
  if (auto const error = hipStreamAddCallback(stream.native(), &detail::run_stream_callback<State>, state.get(), 0);
      error != hipSuccess) {
    return failure(error);  // never queued, so `state` is still ours and is freed here
  }
  // The runtime holds it now and will hand it to run_stream_callback exactly once.
  static_cast<void>(state.release());
  return outcome::success();
}

}  // namespace hipxx
