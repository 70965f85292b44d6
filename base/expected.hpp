// Errors a user can meet travel as values: Expected<T> holds a T or an Error whose message says
// what was found and what was expected. Status is Expected<void>. A layer with a richer error
// (net's HttpError) uses Expected<T, ThatError>.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tandem {

struct Error {
    std::string message;
};

template <class T, class E = Error>
class [[nodiscard]] Expected {
  public:
    Expected(T value) : m_state(std::in_place_index<0>, std::move(value)) {}
    Expected(E error) : m_state(std::in_place_index<1>, std::move(error)) {}

    bool ok() const { return m_state.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(m_state); }
    const T& value() const& { return std::get<0>(m_state); }
    T&& value() && { return std::get<0>(std::move(m_state)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const E& error() const { return std::get<1>(m_state); }

  private:
    std::variant<T, E> m_state;
};

template <class E>
class [[nodiscard]] Expected<void, E> {
  public:
    Expected() = default;
    Expected(E error) : m_error(std::move(error)) {}

    bool ok() const { return !m_error; }
    explicit operator bool() const { return ok(); }
    const E& error() const { return *m_error; }

  private:
    std::optional<E> m_error;
};

using Status = Expected<void>;

inline Error makeError(std::string message) {
    return Error{std::move(message)};
}

}  // namespace tandem
