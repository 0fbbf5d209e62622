// The Halide side of the bridge (include/tally/halide/Bridge.h): Halide 21 lowers the pipeline to
// its conceptual statement, Translate.cpp turns it into Tally's IR, and Runner.cpp (which cannot
// see Halide's headers) lowers, compiles and runs it with Tally.

#include "tally/halide/Bridge.h"

#include <cstring>
#include <set>

#include "Runner.h"
#include "tally/Error.h"
#include "tally/IRVisitor.h"

namespace tally {
namespace halide {

namespace HI = Halide::Internal;

namespace {

/** Features Tally injects or answers itself, which Halide must not see: its profiling would
 * be Halide's own calls in the statement. */
bool tally_owns(Target::Feature f) {
    return f == Target::Profile || f == Target::ProfileByTimer;
}

/** The names `X.buffer` of the statement's free buffer variables, for the embedded buffers. */
class BufferNames : public IRVisitor {
public:
    std::set<std::string> names;
    using IRVisitor::visit;
    void visit(const Variable *op) override {
        const std::string suffix = ".buffer";
        if (op->name.size() > suffix.size() &&
            op->name.compare(op->name.size() - suffix.size(), suffix.size(), suffix) == 0) {
            names.insert(op->name.substr(0, op->name.size() - suffix.size()));
        }
    }
};

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
        name = pipeline.outputs()[0].name();
    }
    // Halide's lowering: everything up to its conceptual statement. (For a GPU target Halide
    // goes on to compile its own kernels, which Tally then does not use.)
    Halide::Pipeline p = pipeline;
    Halide::Module hm = p.compile_to_module(args, name, halide_target(target));
    const HI::LoweredFunc *main = nullptr;
    for (const HI::LoweredFunc &f : hm.functions()) {
        if (f.name == name) {
            main = &f;
        }
    }
    if (main == nullptr || !hm.get_conceptual_stmt().defined()) {
        throw CompileError("Halide's module for '" + name + "' has no conceptual statement");
    }

    Module m;
    m.name = name;
    m.target = t;
    m.dialect = Dialect::Halide21;
    LoweredFunc f;
    f.name = name;
    f.linkage = LinkageType::ExternalPlusMetadata;
    for (const HI::LoweredArgument &a : main->args) {
        Argument arg;
        arg.name = a.name;
        arg.kind = a.is_buffer() ? Argument::Buffer : Argument::Scalar;
        arg.type = translate(a.type);
        arg.dimensions = a.is_buffer() ? int(a.dimensions) : -1;
        f.args.push_back(arg);
    }
    f.body = translate(hm.get_conceptual_stmt());

    // The buffers the pipeline embeds (Halide's `buffer lut = {...}`), with their contents.
    // Halide's module also holds its own kernel sources for a GPU target; the statement does
    // not name those.
    BufferNames used;
    f.body.accept(&used);
    for (const Halide::Buffer<> &b : hm.buffers()) {
        if (!used.names.count(b.name())) {
            continue;
        }
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

std::string report(bool json) {
    return detail::report(json);
}

}  // namespace halide
}  // namespace tally
