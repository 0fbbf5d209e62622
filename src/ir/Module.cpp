// Module lookups, and contents for its opaque buffer constants.

#include "tally/Module.h"

#include "tally/Error.h"

namespace tally {

const char *dialect_name(Dialect d) {
    return d == Dialect::Halide21 ? "halide21" : "halide14";
}

bool dialect_from_name(const std::string &s, Dialect *out) {
    for (Dialect d : {Dialect::Halide14, Dialect::Halide21}) {
        if (s == dialect_name(d)) {
            *out = d;
            return true;
        }
    }
    return false;
}

void Module::define_buffer_constant(const std::string &n, const Type &t, std::vector<int32_t> mins,
                                    std::vector<int32_t> extents, std::string bytes) {
    BufferConstant *b = nullptr;
    std::string names;
    for (BufferConstant &c : buffers) {
        if (c.opaque) {
            names += (names.empty() ? "'" : ", '") + c.name + "'";
            if (c.name == n) {
                b = &c;
            }
        }
    }
    // A statement alone (Halide's conceptual statement) declares no buffer constants: a buffer
    // its pipeline embeds is a free `<n>.buffer` there, which made <n> a buffer argument of the
    // module's one function. Given contents, that argument becomes the constant it stands for.
    if (!b && functions.size() == 1) {
        std::vector<Argument> &args = functions[0].args;
        for (size_t i = 0; i < args.size(); i++) {
            if (args[i].kind == Argument::Buffer && args[i].name == n) {
                args.erase(args.begin() + ptrdiff_t(i));
                BufferConstant c;
                c.name = n;
                buffers.push_back(c);
                b = &buffers.back();
                break;
            }
        }
    }
    user_assert(b) << "buffer constant '" << n << "': module '" << name
                   << "' has no opaque buffer constant of that name (`buffer " << n
                   << " = {...}`), nor is that a buffer argument of its one function; "
                   << (names.empty() ? std::string("it has none") : "it has " + names);
    user_assert(t.is_valid() && t.is_scalar() && !t.is_handle())
        << "buffer constant '" << n << "': its elements need a scalar number type";
    user_assert(mins.size() == extents.size())
        << "buffer constant '" << n << "': " << extents.size() << " extents but " << mins.size()
        << " mins";
    uint64_t count = 1;
    for (size_t d = 0; d < extents.size(); d++) {
        user_assert(extents[d] >= 0 && int64_t(mins[d]) + extents[d] - 1 <= INT32_MAX)
            << "buffer constant '" << n << "': dimension " << d << " (min " << mins[d]
            << ", extent " << extents[d] << ") does not fit int32";
        user_assert(count <= uint64_t(INT32_MAX))
            << "buffer constant '" << n << "': its strides would exceed int32";
        count *= uint64_t(extents[d]);
    }
    user_assert(count * uint64_t(t.bytes()) == bytes.size())
        << "buffer constant '" << n << "': its shape holds " << count << " elements of "
        << t.to_string() << " (" << count * uint64_t(t.bytes()) << " bytes), the contents are "
        << bytes.size() << " bytes";
    b->type = t;
    b->mins = std::move(mins);
    b->extents = std::move(extents);
    b->bytes = std::move(bytes);
}

const char *linkage_name(LinkageType l) {
    switch (l) {
    case LinkageType::External:
        return "external";
    case LinkageType::ExternalPlusArgv:
        return "external_plus_argv";
    case LinkageType::ExternalPlusMetadata:
        return "external_plus_metadata";
    case LinkageType::Internal:
        return "internal";
    }
    return "?";
}

LoweredFunc *Module::find_function(const std::string &n) {
    for (LoweredFunc &f : functions) {
        if (f.name == n) {
            return &f;
        }
    }
    return nullptr;
}

const LoweredFunc *Module::find_function(const std::string &n) const {
    for (const LoweredFunc &f : functions) {
        if (f.name == n) {
            return &f;
        }
    }
    return nullptr;
}

const Kernel *Module::find_kernel(const std::string &n) const {
    for (const Kernel &k : kernels) {
        if (k.name == n) {
            return &k;
        }
    }
    return nullptr;
}

}  // namespace tally
