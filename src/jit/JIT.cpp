// In-process compilation (ORC LLJIT) and ahead-of-time output (object, header, LLVM IR, stmt).
//
// Both use the target machine the module's target asks for (codegen/HostMachine.h: `host` is this
// CPU with all its features, an explicit x86-64 target gets the CPU and features Halide 14 picks
// for it); the JIT also checks that this CPU can run that code. The JIT resolves runtime symbols
// in the library that holds the runtime (this one: found with dladdr, so it works even when the
// library was loaded with RTLD_LOCAL, as Python loads extension modules), then in the extern
// libraries the caller names (CompileOptions::extern_libraries: the C functions of extern
// stages), then in the process (libc, libm).

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include <llvm/ExecutionEngine/JITLink/JITLink.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "codegen/Analysis.h"
#include "codegen/CodeGen_Host.h"
#include "codegen/CodeGen_LLVM.h"
#include "codegen/CodeGen_OpenCL.h"
#include "codegen/CodeGen_PTX.h"
#include "codegen/DeviceKernels.h"
#include "codegen/HostMachine.h"
#include "ir/LargeStack.h"
#include "ir/RuntimeCalls.h"
#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally_runtime.h"

namespace tally {

namespace {

std::string llvm_error(llvm::Error e) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << e;
    return s;
}

/** The target machine for a module's target: FP fusion only where no strict_float forbids it. */
std::unique_ptr<llvm::TargetMachine> target_machine(const Module &lowered, int opt_level) {
    return host_target_machine(lowered.target, opt_level, uses_strict_float(lowered));
}

/** The path of the shared object holding the runtime (this library). */
std::string runtime_library_path() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&halide_do_par_for), &info) && info.dli_fname) {
        return info.dli_fname;
    }
    return "";
}

/** Appends the callable symbols `g` defines to this process's perf map (see PerfMapPlugin). */
llvm::Error append_perf_map(llvm::jitlink::LinkGraph &g) {
    std::string lines;
    for (const llvm::jitlink::Symbol *sym : g.defined_symbols()) {
        if (sym->isCallable() && sym->hasName() && sym->getSize() > 0) {
            char head[64];
            std::snprintf(head, sizeof(head), "%llx %llx ",
                          (unsigned long long)sym->getAddress().getValue(),
                          (unsigned long long)sym->getSize());
            lines += head + sym->getName().str() + "\n";
        }
    }
    static std::mutex lock;
    std::lock_guard<std::mutex> hold(lock);
    std::ofstream("/tmp/perf-" + std::to_string(getpid()) + ".map", std::ios::app) << lines;
    return llvm::Error::success();
}

/** With TALLY_PERF_MAP set, every function the JIT links is appended to /tmp/perf-<pid>.map
 * (`START SIZE NAME`, hexadecimal, the format `perf report` reads for code it has no object file
 * for), so that profiles of JIT-compiled pipelines name their closures and loops' functions. */
class PerfMapPlugin : public llvm::orc::ObjectLinkingLayer::Plugin {
public:
    void modifyPassConfig(llvm::orc::MaterializationResponsibility &, llvm::jitlink::LinkGraph &,
                          llvm::jitlink::PassConfiguration &config) override {
        config.PostFixupPasses.emplace_back(&append_perf_map);
    }
    llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility &) override {
        return llvm::Error::success();
    }
    llvm::Error notifyRemovingResources(llvm::orc::JITDylib &, llvm::orc::ResourceKey) override {
        return llvm::Error::success();
    }
    void notifyTransferringResources(llvm::orc::JITDylib &, llvm::orc::ResourceKey,
                                     llvm::orc::ResourceKey) override {}
};

}  // namespace

struct JITModule::Impl {
    using Argv = int (*)(void **);
    Module module;
    const LoweredFunc *entry = nullptr;
    std::unique_ptr<llvm::orc::LLJIT> jit;
    /** Each pipeline function's `<name>_argv` entry, resolved once when compiled: a lookup in the
     * JIT takes microseconds, as long as a small pipeline runs. */
    std::map<std::string, Argv> argv;
    /** The entry's, from `argv`. */
    Argv entry_argv = nullptr;
    /** Each pipeline function's argument binder, made when compiled. */
    std::map<std::string, ArgumentBinder> binders;
};

JITModule::JITModule(std::unique_ptr<Impl> i) : impl(std::move(i)) {}
JITModule::~JITModule() = default;

const Module &JITModule::module() const {
    return impl->module;
}
const LoweredFunc &JITModule::entry() const {
    return *impl->entry;
}

void *JITModule::symbol(const std::string &name) const {
    auto sym = impl->jit->lookup(name);
    if (!sym) {
        llvm::consumeError(sym.takeError());
        return nullptr;
    }
    return sym->toPtr<void *>();
}

const ArgumentBinder &JITModule::binder() const {
    return impl->binders.at(impl->entry->name);
}

const ArgumentBinder &JITModule::binder(const std::string &function) const {
    auto it = impl->binders.find(function);
    user_assert(it != impl->binders.end())
        << "the module has no pipeline function '" << function << "'";
    return it->second;
}

int JITModule::call(const std::vector<ArgumentValue> &args) const {
    BoundArguments bound = binder().bind(args);
    return run(bound.argv());
}

int JITModule::call(const std::string &function, const std::vector<ArgumentValue> &args) const {
    BoundArguments bound = binder(function).bind(args);
    return run(function, bound.argv());
}

int JITModule::run(void **args) const {
    return impl->entry_argv(args);
}

int JITModule::run(const std::string &function, void **args) const {
    auto it = impl->argv.find(function);
    if (it != impl->argv.end()) {
        return it->second(args);
    }
    user_error << "the module has no pipeline function '" << function << "'";
    return -1;
}

static std::unique_ptr<JITModule> compile_jit_impl(const Module &lowered,
                                                   const CompileOptions &opts) {
    std::vector<const LoweredFunc *> entries = pipeline_functions(lowered);
    user_assert(!entries.empty()) << "module '" << lowered.name << "' has no pipeline function";

    auto impl = std::make_unique<JITModule::Impl>();
    impl->module = lowered;
    for (const LoweredFunc &f : impl->module.functions) {
        if (&f - impl->module.functions.data() == entries[0] - lowered.functions.data()) {
            impl->entry = &f;
        }
    }

    check_runs_here(lowered.target);
    auto tm = target_machine(impl->module, opts.opt_level);
    auto ctx = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> m =
        codegen_host(impl->module, *ctx, *tm, compile_kernels(impl->module));
    optimize_module(*m, *tm, opts.opt_level);

    // The JIT compiles for the same machine the module was optimised for.
    llvm::orc::JITTargetMachineBuilder jtmb(tm->getTargetTriple());
    jtmb.setCPU(tm->getTargetCPU().str());
    jtmb.addFeatures(std::vector<std::string>{tm->getTargetFeatureString().str()});
    jtmb.setOptions(tm->Options);
    jtmb.setCodeGenOptLevel(tm->getOptLevel());
    jtmb.setRelocationModel(llvm::Reloc::PIC_);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
    if (!jit) {
        user_error << "cannot create the JIT: " << llvm_error(jit.takeError());
    }
    // ORC reports a symbol it cannot resolve (an extern function no library defines) through the
    // session's reporter, then fails the lookup with a vaguer error: keep the report for that.
    static const bool perf_map = tally_env_flag("TALLY_PERF_MAP") != 0;  // read (and said) once
    if (perf_map) {
        if (auto *oll =
                llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&(*jit)->getObjLinkingLayer())) {
            oll->addPlugin(std::make_unique<PerfMapPlugin>());
        }
    }
    auto reported = std::make_shared<std::string>();
    (*jit)->getExecutionSession().setErrorReporter([reported](llvm::Error e) {
        *reported += (reported->empty() ? "" : "; ") + llvm_error(std::move(e));
    });
    llvm::orc::JITDylib &jd = (*jit)->getMainJITDylib();
    char prefix = (*jit)->getDataLayout().getGlobalPrefix();
    std::string lib = runtime_library_path();
    if (!lib.empty()) {
        auto g = llvm::orc::DynamicLibrarySearchGenerator::Load(lib.c_str(), prefix);
        if (g) {
            jd.addGenerator(std::move(*g));
        } else {
            llvm::consumeError(g.takeError());
        }
    }
    for (const std::string &path : opts.extern_libraries) {
        auto g = llvm::orc::DynamicLibrarySearchGenerator::Load(path.c_str(), prefix);
        if (!g) {
            user_error << "cannot load the extern library '" << path
                       << "': " << llvm_error(g.takeError());
        }
        jd.addGenerator(std::move(*g));
    }
    auto proc = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
    if (!proc) {
        user_error << "cannot search the process for symbols: " << llvm_error(proc.takeError());
    }
    jd.addGenerator(std::move(*proc));
    if (auto err = (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)))) {
        user_error << "cannot add the module to the JIT: " << llvm_error(std::move(err));
    }
    impl->jit = std::move(*jit);
    // Resolve every entry now, so that a missing symbol is a compile error, not a crash later.
    for (const LoweredFunc *f : entries) {
        auto sym = impl->jit->lookup(entry_symbols(impl->module, *f).argv);
        if (!sym) {
            std::string why = llvm_error(sym.takeError());
            if (!reported->empty()) {
                why = *reported + " (extern functions are looked up in the runtime, the extern "
                                  "libraries given to the JIT and the process)";
            }
            user_error << "JIT compilation of '" << f->name << "' failed: " << why;
        }
        impl->argv[f->name] = sym->toPtr<JITModule::Impl::Argv>();
        impl->binders.emplace(f->name, ArgumentBinder(impl->module, *f));
    }
    impl->entry_argv = impl->argv.at(impl->entry->name);
    return std::make_unique<JITModule>(std::move(impl));
}

std::unique_ptr<JITModule> compile_jit(const Module &lowered, const CompileOptions &opts) {
    return with_large_stack([&]() { return compile_jit_impl(lowered, opts); });
}

std::string c_header(const Module &lowered) {
    std::ostringstream h;
    std::string guard = "TALLY_PIPELINE_" + lowered.name + "_H";
    for (char &c : guard) {
        c = std::isalnum((unsigned char)c) ? std::toupper((unsigned char)c) : '_';
    }
    // Under c_plus_plus_name_mangling the entry points are C++ functions in their namespaces
    // (entry_symbols), declared with the types they were mangled from; else C functions.
    const bool cxx = lowered.target.has_feature(Target::CPlusPlusMangling);
    h << "/* Generated by tallyc for target " << lowered.target.to_string() << ". */\n"
      << "#ifndef " << guard << "\n#define " << guard << "\n\n"
      << "#include <stdbool.h>\n#include <stdint.h>\n\n"
      // Self-contained, as Halide's own headers are: the structs are declared, not defined, so
      // that a caller can define them with tally_runtime.h or with Halide's HalideRuntime.h (the
      // same layout; HalideBuffer.h's Halide::Runtime::Buffer included), which cannot both be in
      // one file.
      << "struct halide_buffer_t;\nstruct halide_filter_metadata_t;\n\n";
    if (cxx) {
        h << "#ifndef __cplusplus\n#error \"" << lowered.name
          << ": compiled with c_plus_plus_name_mangling, its entry points are C++ functions\"\n"
          << "#endif\n\n";
    } else {
        h << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
    }
    auto c_type = [cxx](const Argument &a) -> std::string {
        if (a.is_buffer()) {
            return "struct halide_buffer_t *";
        }
        if (a.name == "__user_context") {
            return cxx ? "const void *" : "void *";
        }
        const Type t = a.type.is_valid() ? a.type : Int(32);
        if (t.is_handle()) {
            return cxx ? t.to_string() : "void *";
        }
        if (t.is_float()) {
            return t.bits() == 64   ? "double "
                   : t.bits() == 32 ? "float "
                   : cxx            ? "_Float16 "
                                    : "uint16_t ";
        }
        if (t.is_bool()) {
            return "bool ";
        }
        return std::string(t.is_uint() ? "uint" : "int") + std::to_string(t.bits()) + "_t ";
    };
    for (const LoweredFunc *f : pipeline_functions(lowered)) {
        const EntrySymbols symbols = entry_symbols(lowered, *f);
        const std::string &simple = symbols.name;
        std::string close;
        if (cxx) {
            for (const std::string &ns : symbols.namespaces) {
                h << "namespace " << ns << " {\n";
                close = "}  // namespace " + ns + "\n" + close;
            }
        }
        h << "/** Runs the pipeline; returns 0 or a negative tally_error_code_t. */\n"
          << "int " << simple << "(";
        for (size_t i = 0; i < f->args.size(); i++) {
            std::string n = f->args[i].name;
            for (char &c : n) {
                c = std::isalnum((unsigned char)c) ? c : '_';
            }
            h << (i ? ", " : "") << c_type(f->args[i]) << n;
        }
        if (f->args.empty()) {
            h << "void";
        }
        h << ");\n\n/** The same, with arguments as an array: buffers as halide_buffer_t *, "
             "scalars by pointer. */\nint "
          << simple << "_argv(void **args);\n";
        if (f->linkage == LinkageType::ExternalPlusMetadata) {
            h << "\n/** Its arguments (name, kind, rank, type), target and name, as Halide "
                 "describes them. */\nconst struct halide_filter_metadata_t *"
              << simple << "_metadata(void);\n";
        }
        h << close << "\n";
    }
    if (!cxx) {
        h << "#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n";
    }
    h << "#endif\n";
    return h.str();
}

namespace {

std::unique_ptr<llvm::Module> optimized(const Module &lowered, llvm::LLVMContext &ctx,
                                        llvm::TargetMachine &tm, int level) {
    std::unique_ptr<llvm::Module> m = codegen_host(lowered, ctx, tm, compile_kernels(lowered));
    optimize_module(*m, tm, level);
    return m;
}

void write_text(const std::string &path, const std::string &text) {
    std::ofstream out(path, std::ios::binary);
    user_assert(out.good()) << path << ": error: cannot write file";
    out << text;
    user_assert(out.good()) << path << ": error: write failed";
}

}  // namespace

static std::string compile_to_llvm_ir_impl(const Module &lowered, const CompileOptions &opts) {
    auto tm = target_machine(lowered, opts.opt_level);
    llvm::LLVMContext ctx;
    auto m = optimized(lowered, ctx, *tm, opts.opt_level);
    std::string s;
    llvm::raw_string_ostream os(s);
    m->print(os, nullptr);
    return s;
}

std::string compile_to_llvm_ir(const Module &lowered, const CompileOptions &opts) {
    return with_large_stack([&]() { return compile_to_llvm_ir_impl(lowered, opts); });
}

static void compile_to_files_impl(const Module &lowered, const OutputFiles &out,
                                  const CompileOptions &opts) {
    if (!out.stmt.empty()) {
        write_text(out.stmt, to_string(lowered));
    }
    if (!out.header.empty()) {
        write_text(out.header, c_header(lowered));
    }
    if (out.object.empty() && out.llvm_ir.empty() && out.assembly.empty()) {
        return;
    }
    auto tm = target_machine(lowered, opts.opt_level);
    llvm::LLVMContext ctx;
    auto m = optimized(lowered, ctx, *tm, opts.opt_level);
    if (!out.llvm_ir.empty()) {
        std::string s;
        llvm::raw_string_ostream os(s);
        m->print(os, nullptr);
        write_text(out.llvm_ir, s);
    }
    // Each machine-code output runs the code generator on a copy (it changes the module).
    auto emit = [&](const std::string &path, llvm::CodeGenFileType type) {
        std::error_code ec;
        llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
        user_assert(!ec) << path << ": error: cannot write file: " << ec.message();
        llvm::legacy::PassManager pm;
        user_assert(!tm->addPassesToEmitFile(pm, os, nullptr, type))
            << "the target cannot emit "
            << (type == llvm::CodeGenFileType::ObjectFile ? "object files" : "assembly");
        std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*m);
        pm.run(*copy);
        os.flush();
        user_assert(!os.has_error()) << path << ": error: write failed";
    };
    if (!out.assembly.empty()) {
        emit(out.assembly, llvm::CodeGenFileType::AssemblyFile);
    }
    if (!out.object.empty()) {
        emit(out.object, llvm::CodeGenFileType::ObjectFile);
    }
}

void compile_to_files(const Module &lowered, const OutputFiles &out, const CompileOptions &opts) {
    with_large_stack([&]() { compile_to_files_impl(lowered, out, opts); });
}

std::string compile_to_ptx(const Module &lowered) {
    return compile_ptx_module(lowered);
}

std::string compile_to_opencl_c(const Module &lowered) {
    return compile_opencl_module(lowered);
}

}  // namespace tally
