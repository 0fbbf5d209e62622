// The Halide side of the bridge (include/tally/halide/Bridge.h): Halide 21 lowers the pipeline to
// its conceptual statement, Translate.cpp turns it into Tally's IR, and Runner.cpp (which cannot
// see Halide's headers) lowers, compiles and runs it with Tally.

#include "tally/halide/Bridge.h"

#include <cctype>
#include <cstring>
#include <set>

#include "Runner.h"
#include "Translate.h"
#include "tally/Error.h"

namespace tally {
namespace halide {

namespace HI = Halide::Internal;

namespace {

/** Features Tally injects or answers itself, which Halide must not see: its profiling would
 * be Halide's own calls in the statement. */
bool tally_owns(Target::Feature f) {
    return f == Target::Profile || f == Target::ProfileByTimer;
}

/** Thrown by CaptureConceptual to end Halide's lowering once it has the statement. */
struct StopLowering {};

/** The last custom lowering pass: Halide runs custom passes on the statement it then keeps as
 * its conceptual statement (Lower.cpp), just before its GPU offload. The pass keeps it and ends
 * the lowering, so that Halide never compiles its own kernels (which Tally would not use, and
 * which Halide refuses for schedules Tally runs, such as 16-bit integers in Vulkan kernels). */
class CaptureConceptual : public HI::IRMutator {
public:
    HI::Stmt stmt;
    using HI::IRMutator::mutate;
    HI::Stmt mutate(const HI::Stmt &s) override {
        stmt = s;
        throw StopLowering();
    }
};

Argument argument(const std::string &name, bool buffer, const Halide::Type &t, int dims) {
    Argument a;
    a.name = name;
    a.kind = buffer ? Argument::Buffer : Argument::Scalar;
    a.type = translate(t);
    a.dimensions = buffer ? dims : -1;
    return a;
}

/** An embedded Halide buffer's elements, dense, dimension 0 innermost. */
std::string dense_bytes(const Halide::Buffer<> &b) {
    Halide::Buffer<> dense = b.copy();
    return std::string(reinterpret_cast<const char *>(dense.data()), dense.size_in_bytes());
}

}  // namespace

Halide::Target halide_target(const std::string &tally_target) {
    const Target t = Target::parse(tally_target);
    std::string s;
    if (t.host) {
        s = Halide::get_host_target().without_feature(Halide::Target::JIT).to_string();
    } else {
        // Tally's printer writes the arch-bits-os triple as Halide does.
        Target bare = t;
        bare.feature_set.reset();
        s = bare.to_string();
    }
    for (int i = 0; i < Target::FeatureEnd; i++) {
        const auto f = Target::Feature(i);
        if (!t.has_feature(f) || tally_owns(f) || !(Target::feature_dialects(f) & Dialects::H21)) {
            continue;
        }
        s += std::string("-") + Target::feature_name(f);
    }
    if (!Halide::Target::validate_target_string(s)) {
        throw CompileError("target '" + tally_target + "' makes the Halide target '" + s +
                           "', which Halide 21 does not accept");
    }
    return Halide::Target(s);
}

Module translate(const Halide::Pipeline &pipeline, const std::vector<Halide::Argument> &args,
                 const std::string &target, const Options &options) {
    Target t = Target::parse(target);
    t.check_supported();
    std::string name = options.name;
    if (name.empty()) {
        if (pipeline.outputs().empty()) {
            throw CompileError("the Halide pipeline has no outputs");
        }
        // Halide's own default (Pipeline::generate_function_name): the first output's name with
        // every character but a letter or digit made '_'. Halide makes Func names unique
        // (`out$1` for a second Func named `out`), and a symbol cannot hold the '$'.
        name = pipeline.outputs()[0].name();
        for (char &c : name) {
            if (!std::isalnum((unsigned char)c)) {
                c = '_';
            }
        }
    }
    // Halide's lowering, up to its conceptual statement, on a pipeline of the same outputs and
    // requirements (custom passes are the pipeline's: the user's run, then the capture), so
    // that the caller's pipeline is left as it was. trace_pipeline() has no getter and is not
    // carried over.
    Halide::Pipeline user = pipeline;
    Halide::Pipeline p(user.outputs(), user.requirements());
    for (const Halide::CustomLoweringPass &c : user.custom_lowering_passes()) {
        p.add_custom_lowering_pass(c.pass, [] {});
    }
    CaptureConceptual capture;
    p.add_custom_lowering_pass(&capture, [] {});
    try {
        p.compile_to_module(args, name, halide_target(target));
    } catch (const StopLowering &) {
    }
    if (!capture.stmt.defined()) {
        throw CompileError("Halide's lowering of '" + name +
                           "' ended before its conceptual "
                           "statement");
    }

    // The arguments, as Halide's lowering makes them after this point: `args`, then each
    // output's buffers. Every parameter the statement uses must be one of them (Halide's own
    // check, which comes after the capture); the Buffers it names directly are embedded.
    std::vector<Argument> fargs;
    for (const Halide::Argument &a : args) {
        fargs.push_back(argument(a.name, a.is_buffer(), a.type, a.dimensions));
    }
    for (const Halide::Func &out : p.outputs()) {
        for (const Halide::OutputImageParam &o : out.output_buffers()) {
            fargs.push_back(argument(o.name(), true, o.type(), o.dimensions()));
        }
    }
    std::map<std::string, Halide::Buffer<>> images;
    Stmt body = translate(capture.stmt, &images);
    for (const Halide::Argument &used : p.infer_arguments(capture.stmt)) {
        bool found = used.name == "__user_context" || images.count(used.name);
        for (const Argument &a : fargs) {
            found = found || a.name == used.name;
        }
        if (!found) {
            throw CompileError("the pipeline '" + name + "' uses the " +
                               (used.is_buffer() ? "image parameter '" : "parameter '") +
                               used.name + "', which is not in its argument list");
        }
    }

    Module m;
    m.name = name;
    m.target = t;
    m.dialect = Dialect::Halide21;
    LoweredFunc f;
    f.name = name;
    f.linkage = LinkageType::ExternalPlusMetadata;
    f.args = fargs;
    f.body = body;
    // The Buffers the pipeline embeds (Halide's `buffer lut = {...}`), with their contents.
    for (const auto &kv : images) {
        const Halide::Buffer<> &b = kv.second;
        std::vector<int32_t> mins, extents;
        for (int d = 0; d < b.dimensions(); d++) {
            mins.push_back(b.dim(d).min());
            extents.push_back(b.dim(d).extent());
        }
        BufferConstant c;
        c.name = b.name();
        m.buffers.push_back(c);
        m.define_buffer_constant(b.name(), translate(b.type()), mins, extents, dense_bytes(b));
    }
    m.functions.push_back(std::move(f));
    return m;
}

// --- Pipeline ------------------------------------------------------------------------------

struct Pipeline::Impl {
    detail::Runner runner;
    std::string name;
    Impl(Module m, const Options &o) : runner(std::move(m), o.opt_level, o.extern_libraries) {}
};

Pipeline::Pipeline(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Pipeline::~Pipeline() = default;

int Pipeline::run(const std::vector<Value> &args) const {
    std::vector<detail::RunValue> values(args.size());
    for (size_t i = 0; i < args.size(); i++) {
        const Value &v = args[i];
        detail::RunValue &r = values[i];
        switch (v.kind()) {
        case Value::Kind::Buffer:
            r.kind = detail::RunValue::Buffer;
            r.buffer = v.buffer();
            break;
        case Value::Kind::Bool:
            r.kind = detail::RunValue::Bool;
            r.u = v.as_uint();
            break;
        case Value::Kind::Int:
            r.kind = detail::RunValue::Int;
            r.i = v.as_int();
            break;
        case Value::Kind::UInt:
            r.kind = detail::RunValue::UInt;
            r.u = v.as_uint();
            break;
        case Value::Kind::Float:
            r.kind = detail::RunValue::Float;
            r.f = v.as_float();
            break;
        }
    }
    return impl->runner.run(values);
}

const Module &Pipeline::translated() const {
    return impl->runner.translated();
}

const Module &Pipeline::lowered() const {
    return impl->runner.lowered();
}

const std::string &Pipeline::name() const {
    return impl->name;
}

std::unique_ptr<Pipeline> compile(const Halide::Pipeline &pipeline,
                                  const std::vector<Halide::Argument> &args,
                                  const std::string &target, const Options &options) {
    Module m = translate(pipeline, args, target, options);
    std::string name = m.name;
    auto impl = std::make_unique<Pipeline::Impl>(std::move(m), options);
    impl->name = name;
    return std::make_unique<Pipeline>(std::move(impl));
}

void compile_to_files(const Halide::Pipeline &pipeline, const std::vector<Halide::Argument> &args,
                      const std::string &prefix, const std::string &target,
                      const Options &options) {
    detail::write_files(translate(pipeline, args, target, options), prefix, options.opt_level);
}

void compile_multitarget_wrapper(const Module &translated, const std::string &name,
                                 const std::vector<std::pair<std::string, std::string>> &variants,
                                 const std::string &prefix) {
    detail::write_multitarget_wrapper(translated, name, variants, prefix);
}

std::string report(bool json) {
    return detail::report(json);
}

}  // namespace halide
}  // namespace tally
