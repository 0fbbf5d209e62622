// tally::Buffer (tally/Buffer.h): a halide_buffer_t with the dimensions it points at and, when
// it owns them, its elements.
//
// Owned elements are 64-byte aligned (a cache line, and the widest vector the host code uses)
// and zeroed. A buffer checks its shape when it is made, so that every halide_buffer_t a caller
// builds this way holds what Halide's code assumes: extents of at least 0, coordinates and
// strides that fit int32. Moving a buffer moves the halide_buffer_t with it: its dimensions live
// in a vector whose storage does not move, and the moved-from buffer forgets its device copy,
// which only the new one frees.

#include "tally/Buffer.h"

#include <cstring>
#include <new>
#include <string>

#include "tally/Error.h"

namespace tally {

namespace {

constexpr size_t element_alignment = 64;

void free_elements(uint8_t *p) {
    ::operator delete[](p, std::align_val_t(element_alignment));
}

/** Checks one dimension: an extent of at least 0, and a last coordinate inside int32. */
void check_dimension(int d, const halide_dimension_t &dim) {
    user_assert(dim.extent >= 0) << "buffer dimension " << d << " has a negative extent ("
                                 << dim.extent << ")";
    user_assert(dim.extent == 0 || int64_t(dim.min) + dim.extent - 1 <= INT32_MAX)
        << "buffer dimension " << d << " ends past " << INT32_MAX << " (min " << dim.min
        << " + extent " << dim.extent << " - 1)";
}

}  // namespace

void Buffer<void>::check_element_size(const Type &type, size_t bytes) {
    user_assert(type.is_valid() && size_t(type.bytes()) == bytes)
        << "a buffer of " << type.to_string() << " elements cannot store them in " << bytes
        << "-byte elements";
}

Buffer<void>::Buffer(const Type &type, const std::vector<int32_t> &extents,
                     const std::vector<int32_t> &mins) {
    user_assert(mins.empty() || mins.size() == extents.size())
        << "a buffer of " << extents.size() << " dimensions given " << mins.size() << " mins";
    std::vector<halide_dimension_t> dims;
    // Strides are int32 in halide_buffer_t: each (the product of the extents below it) must fit.
    uint64_t count = 1;
    for (size_t d = 0; d < extents.size(); d++) {
        user_assert(count <= uint64_t(INT32_MAX))
            << "a dense buffer of these extents has a stride past int32 in dimension " << d;
        dims.push_back({mins.empty() ? 0 : mins[d], extents[d], int32_t(count), 0});
        check_dimension(int(d), dims.back());
        count *= uint64_t(extents[d]);
    }
    user_assert(type.is_valid() && type.is_scalar() && !type.is_handle())
        << "a buffer's elements must be numbers, not " << type.to_string();
    uint64_t bytes = 0;
    user_assert(!__builtin_mul_overflow(count, uint64_t(type.bytes()), &bytes) &&
                bytes <= uint64_t(PTRDIFF_MAX))
        << "a buffer of " << count << " " << type.to_string() << " elements is too large";
    owned_ = std::unique_ptr<uint8_t, void (*)(uint8_t *)>(
        static_cast<uint8_t *>(
            ::operator new[](size_t(bytes), std::align_val_t(element_alignment))),
        free_elements);
    std::memset(owned_.get(), 0, size_t(bytes));
    init(type, owned_.get(), std::move(dims));
}

Buffer<void>::Buffer(const Type &type, void *host, std::vector<halide_dimension_t> dims) {
    init(type, host, std::move(dims));
}

Buffer<void>::Buffer(const Type &type, const void *host, std::vector<halide_dimension_t> dims) {
    init(type, const_cast<void *>(host), std::move(dims));
    read_only_ = true;
}

void Buffer<void>::init(const Type &type, void *host, std::vector<halide_dimension_t> dims) {
    user_assert(type.is_valid() && type.is_scalar() && !type.is_handle())
        << "a buffer's elements must be numbers, not " << type.to_string();
    for (size_t d = 0; d < dims.size(); d++) {
        check_dimension(int(d), dims[d]);
    }
    type_ = type;
    dims_ = std::move(dims);
    buf_ = halide_buffer_t{};
    buf_.host = static_cast<uint8_t *>(host);
    buf_.type = halide_type_t{uint8_t(type.code()), uint8_t(type.bits()), 1};
    buf_.dimensions = int32_t(dims_.size());
    buf_.dim = dims_.empty() ? nullptr : dims_.data();
}

Buffer<void>::Buffer(Buffer &&other) noexcept
    : type_(std::move(other.type_)), dims_(std::move(other.dims_)), owned_(std::move(other.owned_)),
      buf_(other.buf_), read_only_(other.read_only_) {
    other.buf_ = halide_buffer_t{};
}

Buffer<void> &Buffer<void>::operator=(Buffer &&other) noexcept {
    if (this != &other) {
        release();
        type_ = std::move(other.type_);
        dims_ = std::move(other.dims_);
        owned_ = std::move(other.owned_);
        buf_ = other.buf_;
        read_only_ = other.read_only_;
        other.buf_ = halide_buffer_t{};
    }
    return *this;
}

Buffer<void>::~Buffer() {
    release();
}

void Buffer<void>::release() {
    if (buf_.device_interface) {
        (void)halide_device_free(nullptr, &buf_);
    }
}

size_t Buffer<void>::number_of_elements() const {
    size_t n = 1;
    for (const halide_dimension_t &d : dims_) {
        n *= size_t(d.extent);
    }
    return n;
}

bool Buffer<void>::is_dense() const {
    if (number_of_elements() == 0) {
        return true;  // no element to misplace
    }
    int64_t expected = 1;
    for (const halide_dimension_t &d : dims_) {
        if (d.extent != 1 && d.stride != expected) {
            return false;
        }
        expected *= d.extent;
    }
    return true;
}

bool Buffer<void>::host_dirty() const {
    return tally_buffer_get_host_dirty(&buf_);
}

void Buffer<void>::set_host_dirty(bool dirty) {
    tally_buffer_set_host_dirty(&buf_, dirty);
}

bool Buffer<void>::device_dirty() const {
    return tally_buffer_get_device_dirty(&buf_);
}

int Buffer<void>::copy_to_host() {
    return buf_.device_interface && device_dirty() ? halide_copy_to_host(nullptr, &buf_) : 0;
}

int Buffer<void>::device_free() {
    return buf_.device_interface ? halide_device_free(nullptr, &buf_) : 0;
}

}  // namespace tally
