/** \file
 * The buffers callers give a pipeline: tally::Buffer, a halide_buffer_t (the runtime's,
 * runtime/include/tally_runtime.h) together with its dimensions and, when it owns them, its
 * elements. It frees its device copy when it goes away (the runtime never frees a caller's
 * buffer by itself). The argument binder (tally/Arguments.h) takes these for buffer arguments.
 *
 * The conventions are Halide's: dimension 0 is the innermost (numpy's last axis); strides count
 * elements, not bytes; dimension d addresses the coordinates min .. min + extent - 1, all int32.
 * `Buffer<>` has its element type at run time (the Python module, tally-run); `Buffer<T>` holds
 * elements of the C++ number type T and gives typed access to them.
 */
#ifndef TALLY_BUFFER_H
#define TALLY_BUFFER_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "tally/Type.h"
#include "tally_runtime.h"

namespace tally {

/** The element type of C++ type T: Bool() for bool, Float(32) for float, Int(16) for int16_t,
 * UInt(8) for uint8_t, and so on. */
template <typename T>
Type type_of() {
    static_assert(std::is_arithmetic<T>::value, "type_of<T>: T must be a number type");
    if constexpr (std::is_same<T, bool>::value) {
        return Bool();
    } else if constexpr (std::is_floating_point<T>::value) {
        return Float(int(8 * sizeof(T)));
    } else if constexpr (std::is_signed<T>::value) {
        return Int(int(8 * sizeof(T)));
    } else {
        return UInt(int(8 * sizeof(T)));
    }
}

template <typename T = void>
class Buffer;

/** A buffer whose element type is known at run time. Move-only: its halide_buffer_t points into
 * it. */
template <>
class Buffer<void> {
public:
    /** A dense buffer owning its elements, all zero: extents[d] elements in dimension d
     * (strides 1, extents[0], extents[0] * extents[1], ...), with mins `mins` (all 0 when not
     * given). No extents make a 0-D buffer of one element. Throws CompileError when the mins
     * are not one per dimension, an extent is negative, a dimension's last coordinate or a
     * stride does not fit int32, or the type is not a scalar number type. */
    Buffer(const Type &type, const std::vector<int32_t> &extents,
           const std::vector<int32_t> &mins = {});
    /** A buffer over elements the caller owns and keeps alive while the buffer lives; nothing is
     * copied. `dims` gives each dimension's min, extent and stride (in elements), dimension 0
     * first. Throws CompileError on a negative extent or a last coordinate past int32. */
    Buffer(const Type &type, void *host, std::vector<halide_dimension_t> dims);
    /** The same over elements the pipeline must not write: the binder refuses this buffer for
     * an argument the pipeline writes. */
    Buffer(const Type &type, const void *host, std::vector<halide_dimension_t> dims);

    Buffer(Buffer &&other) noexcept;
    Buffer &operator=(Buffer &&other) noexcept;
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    /** Frees the device copy, if there is one. */
    ~Buffer();

    const Type &type() const { return type_; }
    int dimensions() const { return int(dims_.size()); }
    const halide_dimension_t &dim(int d) const { return dims_[size_t(d)]; }
    int32_t min(int d) const { return dim(d).min; }
    int32_t extent(int d) const { return dim(d).extent; }
    int32_t stride(int d) const { return dim(d).stride; }
    /** The product of the extents (1 for a 0-D buffer). */
    size_t number_of_elements() const;
    /** Do the elements lie densely in Halide's order: stride 1 in dimension 0 and each further
     * stride the one before times its extent? A dimension of extent 1 may have any stride (it
     * never steps), as in numpy. */
    bool is_dense() const;
    /** Was it made over elements the pipeline must not write? */
    bool is_read_only() const { return read_only_; }

    /** The element at coordinates (min(0), min(1), ...). */
    void *host() { return buf_.host; }
    const void *host() const { return buf_.host; }
    /** The halide_buffer_t to pass to code that takes one (valid while the buffer lives). */
    halide_buffer_t *raw() { return &buf_; }
    const halide_buffer_t *raw() const { return &buf_; }

    /** Whether the host copy is newer than the device copy; setting it says the caller wrote
     * the host copy (halide_copy_to_device moves data only from a dirty host). */
    bool host_dirty() const;
    void set_host_dirty(bool dirty = true);
    /** Whether the device copy is newer than the host copy. */
    bool device_dirty() const;
    /** Brings the device copy's data to the host if it is newer (halide_copy_to_host): 0, or
     * the runtime's negative error code. */
    int copy_to_host();
    /** Frees the device copy, if any (halide_device_free): 0, or a negative error code. */
    int device_free();

protected:
    /** Throws CompileError unless `type` takes `bytes` bytes per element. */
    static void check_element_size(const Type &type, size_t bytes);

private:
    void init(const Type &type, void *host, std::vector<halide_dimension_t> dims);
    void release();

    Type type_;
    std::vector<halide_dimension_t> dims_;
    /** The elements, when the buffer owns them. */
    std::unique_ptr<uint8_t, void (*)(uint8_t *)> owned_{nullptr, nullptr};
    halide_buffer_t buf_{};
    bool read_only_ = false;
};

/** A buffer of elements of the C++ number type T. */
template <typename T>
class Buffer : public Buffer<void> {
    static_assert(std::is_arithmetic<T>::value, "Buffer<T>: T must be a number type");

public:
    /** A dense buffer of type_of<T>() owning its elements, all zero (see Buffer<>). */
    explicit Buffer(const std::vector<int32_t> &extents, const std::vector<int32_t> &mins = {})
        : Buffer<void>(type_of<T>(), extents, mins) {}
    /** The same, of element type `type` stored in T's of its size: UInt(1) (bool) in uint8_t,
     * Float(16) in uint16_t. Throws CompileError when the sizes differ. */
    Buffer(const Type &type, const std::vector<int32_t> &extents,
           const std::vector<int32_t> &mins = {})
        : Buffer<void>(stored_in_t(type), extents, mins) {}
    /** Over elements the caller owns (see Buffer<>); const ones are read-only. */
    Buffer(T *host, std::vector<halide_dimension_t> dims)
        : Buffer<void>(type_of<T>(), static_cast<void *>(host), std::move(dims)) {}
    Buffer(const T *host, std::vector<halide_dimension_t> dims)
        : Buffer<void>(type_of<T>(), static_cast<const void *>(host), std::move(dims)) {}

    T *data() { return static_cast<T *>(host()); }
    const T *data() const { return static_cast<const T *>(host()); }
    /** The number of elements. Indexing and iteration run over them in memory order, which is
     * Halide's order for dense buffers: dimension 0 fastest. */
    size_t size() const { return number_of_elements(); }
    T &operator[](size_t i) { return data()[i]; }
    const T &operator[](size_t i) const { return data()[i]; }
    T *begin() { return data(); }
    T *end() { return data() + size(); }
    const T *begin() const { return data(); }
    const T *end() const { return data() + size(); }
    /** A copy of the elements, in memory order. */
    std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

private:
    static const Type &stored_in_t(const Type &type);
};

template <typename T>
const Type &Buffer<T>::stored_in_t(const Type &type) {
    check_element_size(type, sizeof(T));
    return type;
}

}  // namespace tally

#endif  // TALLY_BUFFER_H
