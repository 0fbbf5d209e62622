// A multi-target library's dispatcher (multitarget_wrapper, tally/Compiler.h), as Halide's
// compile_multitarget makes one: the variants are one pipeline compiled for several x86-64
// targets, the last the baseline, and the wrapper, named as the pipeline, calls the first
// variant whose ISA extensions the running CPU has and returns its result. What a variant's
// code may use is codegen/HostMachine's list for its target (the attributes its code is
// compiled with); the runtime's tally_cpu_has_features checks it (runtime/src/core/
// cpu_features.c). A variant that needs no extension runs wherever the wrapper does, so nothing
// after it is ever chosen.

#include "tally/Compiler.h"

#include <set>

#include "codegen/HostMachine.h"
#include "ir/RuntimeCalls.h"
#include "tally/Error.h"

namespace tally {

Module multitarget_wrapper(const std::string &name, const std::vector<Argument> &args,
                           const std::vector<MultitargetVariant> &variants) {
    user_assert(!variants.empty()) << "multi-target '" << name << "': no variants";
    const Target &base = variants.back().target;
    // The wrapper's `return variant(args)`: Halide's `let r = f(...) in assert(r == 0, r)`.
    auto call_and_return = [&](const std::string &function) {
        std::vector<Expr> values;
        for (const Argument &a : args) {
            values.push_back(a.is_buffer() ? buffer_var(a.name) : Variable::make(a.type, a.name));
        }
        const std::string r = name + ".result";
        Expr result = Variable::make(Int(32), r);
        return LetStmt::make(r, Call::make(Int(32), function, values, Call::Extern),
                             AssertStmt::make(EQ::make(result, IntImm::make(Int(32), 0)), result));
    };
    std::set<std::string> functions;
    Stmt body;
    for (size_t i = variants.size(); i-- > 0;) {
        const MultitargetVariant &v = variants[i];
        const Target &t = v.target;
        user_assert(!t.host) << "multi-target '" << name
                             << "': name each target (arch-bits-os and features); `host` is the "
                                "compiling machine's every feature, which no CPU check can "
                                "stand for";
        user_assert(t.os == base.os && t.arch == base.arch && t.bits == base.bits)
            << "multi-target '" << name << "': '" << t.to_string() << "' and '" << base.to_string()
            << "' differ in arch-bits-os";
        user_assert(!t.has_feature(Target::CPlusPlusMangling))
            << "multi-target '" << name
            << "': c_plus_plus_name_mangling is not supported for several targets";
        user_assert(v.function != name && functions.insert(v.function).second)
            << "multi-target '" << name << "': the variant function '" << v.function
            << "' is named twice, or as the wrapper";
        std::string isa;
        for (const std::string &e : host_machine(t).isa) {
            isa += (isa.empty() ? "" : ",") + e;
        }
        Stmt call = call_and_return(v.function);
        if (!body.defined() || isa.empty()) {
            body = call;  // the baseline, or a variant every CPU of the arch runs
        } else {
            Expr check = Call::make(Int(32), runtime::tally_cpu_has_features,
                                    {StringImm::make(isa)}, Call::Extern);
            body = IfThenElse::make(NE::make(check, IntImm::make(Int(32), 0)), call, body);
        }
    }
    Module w;
    w.name = name;
    // The baseline's target, without Tally's profiling (each variant profiles itself, under its
    // own name).
    w.target = base;
    for (Target::Feature f : {Target::Profile, Target::ProfileByTimer, Target::ProfileTimestamps}) {
        w.target = w.target.without_feature(f);
    }
    LoweredFunc fn;
    fn.name = name;
    fn.linkage = LinkageType::ExternalPlusMetadata;
    fn.args = args;
    fn.body = body;
    w.functions.push_back(fn);
    return w;
}

}  // namespace tally
