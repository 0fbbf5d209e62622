// The Tally side of the Halide bridge (Runner.h): tally::lower, the JIT, and runs on the caller's
// halide_buffer_t, seen through Tally's Buffer views so that the binder checks them as it checks
// every other call.

#include "Runner.h"

#include <algorithm>
#include <utility>

#include "tally/Error.h"

#include "tally/Arguments.h"
#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/Lower.h"

namespace tally {
namespace halide {
namespace detail {

struct Runner::State {
    Module translated;
    Module lowered;
    std::unique_ptr<JITModule> jit;
};

Runner::Runner(Module translated, int opt_level, std::vector<std::string> extern_libraries)
    : s(new State) {
    s->translated = std::move(translated);
    s->lowered = lower(s->translated, s->translated.target);
    CompileOptions opts;
    opts.opt_level = opt_level;
    opts.extern_libraries = std::move(extern_libraries);
    s->jit = compile_jit(s->lowered, opts);
}

Runner::~Runner() = default;

const Module &Runner::translated() const {
    return s->translated;
}

const Module &Runner::lowered() const {
    return s->lowered;
}

int Runner::run(const std::vector<RunValue> &args) const {
    const ArgumentBinder &binder = s->jit->binder();
    // Views of the caller's buffers: the same host memory; the views' own device fields hold
    // what the pipeline puts on a device, brought back and freed below.
    std::vector<std::unique_ptr<Buffer<>>> views;
    std::vector<ArgumentValue> values;
    values.reserve(args.size());
    for (size_t i = 0; i < args.size(); i++) {
        const RunValue &v = args[i];
        switch (v.kind) {
        case RunValue::Buffer: {
            const std::string name = i < binder.arguments().size() ? binder.arguments()[i].arg.name
                                                                   : "#" + std::to_string(i);
            halide_buffer_t *b = v.buffer;
            if (b == nullptr) {
                throw ArgumentError(ArgumentError::Kind::NotABuffer, name,
                                    "argument '" + name + "' is a null buffer");
            }
            if (b->device != 0 && (b->flags & halide_buffer_flag_device_dirty) != 0) {
                throw CompileError("buffer argument '" + name +
                                   "' holds newer data on a device than on the host: copy it to "
                                   "the host first");
            }
            if (b->host == nullptr) {
                throw CompileError("buffer argument '" + name + "' has no host memory");
            }
            std::vector<halide_dimension_t> dims(b->dim, b->dim + b->dimensions);
            const Type t = Type::from_halide_type_code(uint32_t(b->type.code) |
                                                       uint32_t(b->type.bits) << 8 | 1u << 16);
            views.push_back(std::make_unique<Buffer<>>(t, b->host, std::move(dims)));
            values.emplace_back(*views.back());
            break;
        }
        case RunValue::Bool:
            values.emplace_back(ScalarValue(v.u != 0));
            break;
        case RunValue::Int:
            values.emplace_back(ScalarValue(v.i));
            break;
        case RunValue::UInt:
            values.emplace_back(ScalarValue(v.u));
            break;
        case RunValue::Float:
            values.emplace_back(ScalarValue(v.f));
            break;
        }
    }
    int result = s->jit->call(values);
    for (auto &view : views) {
        if (view->device_dirty()) {
            int r = view->copy_to_host();
            if (result == 0) {
                result = r;
            }
        }
        (void)view->device_free();
    }
    return result;
}

void write_files(const Module &translated, const std::string &prefix, int opt_level) {
    Module lowered = lower(translated, translated.target);
    OutputFiles out;
    out.object = prefix + ".o";
    out.header = prefix + ".h";
    CompileOptions opts;
    opts.opt_level = opt_level;
    compile_to_files(lowered, out, opts);
}

void write_multitarget_wrapper(const Module &translated, const std::string &name,
                               const std::vector<std::pair<std::string, std::string>> &variants,
                               const std::string &prefix) {
    const LoweredFunc *pipeline = nullptr;
    for (const LoweredFunc &f : translated.functions) {
        if (f.linkage != LinkageType::Internal) {
            pipeline = &f;
        }
    }
    user_assert(pipeline) << "multi-target '" << name << "': the translated module '"
                          << translated.name << "' has no pipeline function";
    std::vector<MultitargetVariant> vs;
    for (const auto &v : variants) {
        vs.push_back({v.first, Target::parse(v.second)});
    }
    OutputFiles out;
    out.object = prefix + ".o";
    out.header = prefix + ".h";
    compile_to_files(multitarget_wrapper(name, pipeline->args, vs), out);
}

std::string report(bool json) {
    int32_t n = tally_profiler_report_to_buffer(nullptr, 0, json ? 1 : 0);
    if (n <= 0) {
        return "";
    }
    std::string text(size_t(n) + 1, '\0');
    n = tally_profiler_report_to_buffer(&text[0], text.size(), json ? 1 : 0);
    text.resize(n < 0 ? 0 : std::min(size_t(n), text.size() - 1));
    return text;
}

}  // namespace detail
}  // namespace halide
}  // namespace tally
