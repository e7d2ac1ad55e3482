// Status and Result<T>: errors as values.
//
// Functions that can fail on user input return a Status or a Result<T>. The message names the
// field and the numbers ("layout: tp=3 does not divide num_attention_heads=32"), so the CLI can
// print it as it is. A Status carries a Code that the CLI maps to its exit code: kInvalidInput
// (bad input, exit 2) or kInternal (a bug or an environment failure, exit 1). Library code never
// prints or exits. Both types are cheap to move and are not thread-safe to mutate concurrently.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace scaleplan {

class [[nodiscard]] Status {
 public:
  enum class Code { kOk, kInvalidInput, kNotFound, kInternal };

  Status() = default;
  static Status ok() { return Status(); }
  static Status invalid(std::string message) {
    return Status(Code::kInvalidInput, std::move(message));
  }
  static Status not_found(std::string message) {
    return Status(Code::kNotFound, std::move(message));
  }
  static Status internal(std::string message) {
    return Status(Code::kInternal, std::move(message));
  }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with a context ("config.json: " + message), keeping the code.
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Result<T> holds a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(value_).is_ok() && "Result from an ok Status carries no value");
  }

  bool is_ok() const { return std::holds_alternative<T>(value_); }
  explicit operator bool() const { return is_ok(); }

  const T& value() const& {
    assert(is_ok());
    return std::get<T>(value_);
  }
  T& value() & {
    assert(is_ok());
    return std::get<T>(value_);
  }
  T&& value() && {
    assert(is_ok());
    return std::get<T>(std::move(value_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(value_); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace scaleplan

// Returns early from the enclosing function when `expr` (a Status) is not ok.
#define SP_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::scaleplan::Status sp_status_ = (expr);    \
    if (!sp_status_.is_ok()) return sp_status_; \
  } while (0)

#define SP_CONCAT_INNER_(a, b) a##b
#define SP_CONCAT_(a, b) SP_CONCAT_INNER_(a, b)
// SP_ASSIGN_OR_RETURN(auto x, f()): x = value of f(), or return its Status.
#define SP_ASSIGN_OR_RETURN(lhs, expr) \
  SP_ASSIGN_OR_RETURN_IMPL_(SP_CONCAT_(sp_result_, __LINE__), lhs, expr)
#define SP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.is_ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
