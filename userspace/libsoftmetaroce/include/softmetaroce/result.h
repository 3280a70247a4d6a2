// A minimal std::expected stand-in (C++20 has none): either a value or an error.
#pragma once

#include <cassert>
#include <utility>
#include <variant>

namespace metaroce {

// Wraps an error so that Result<T, E> can be constructed unambiguously from it.
template <typename E>
struct Unexpected {
    explicit Unexpected(E e) : error(std::move(e)) {}
    E error;
};

template <typename E>
Unexpected(E) -> Unexpected<E>;

template <typename T, typename E>
class Result {
  public:
    Result(T value) : storage_(std::in_place_index<0>, std::move(value)) {}
    Result(Unexpected<E> unexpected)
        : storage_(std::in_place_index<1>, std::move(unexpected.error)) {}

    bool ok() const { return storage_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & {
        assert(ok());
        return std::get<0>(storage_);
    }
    const T& value() const& {
        assert(ok());
        return std::get<0>(storage_);
    }
    T&& value() && {
        assert(ok());
        return std::get<0>(std::move(storage_));
    }
    const E& error() const {
        assert(!ok());
        return std::get<1>(storage_);
    }

    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

  private:
    std::variant<T, E> storage_;
};

}  // namespace metaroce
