// In-process compilation (ORC LLJIT) and ahead-of-time output (object, header, LLVM IR, stmt).
//
// Both use a TargetMachine for the host CPU and its features. The JIT resolves runtime symbols
// in the library that holds the runtime (this one: found with dladdr, so it works even when the
// library was loaded with RTLD_LOCAL, as Python loads extension modules), then in the process
// (libc, libm).

#include <dlfcn.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include "codegen/CodeGen_Host.h"
#include "codegen/CodeGen_LLVM.h"
#include "codegen/CodeGen_PTX.h"
#include "codegen/DeviceKernels.h"
#include "ir/LargeStack.h"
#include "ir/RuntimeCalls.h"
#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally_runtime.h"

namespace tally {

namespace {

void init_llvm() {
    static std::once_flag once;
    std::call_once(once, []() {
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        llvm::InitializeNativeTargetAsmParser();
    });
}

std::string llvm_error(llvm::Error e) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << e;
    return s;
}

/** A target machine for the host CPU with all its features. */
std::unique_ptr<llvm::TargetMachine> host_target_machine(int opt_level) {
    init_llvm();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
        user_error << "cannot target the host: " << llvm_error(jtmb.takeError());
    }
    jtmb->setCodeGenOptLevel(opt_level <= 0 ? llvm::CodeGenOptLevel::None
                                            : llvm::CodeGenOptLevel::Aggressive);
    jtmb->setRelocationModel(llvm::Reloc::PIC_);
    auto tm = jtmb->createTargetMachine();
    if (!tm) {
        user_error << "cannot create a target machine: " << llvm_error(tm.takeError());
    }
    return std::move(*tm);
}

/** The path of the shared object holding the runtime (this library). */
std::string runtime_library_path() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&halide_do_par_for), &info) && info.dli_fname) {
        return info.dli_fname;
    }
    return "";
}

}  // namespace

struct JITModule::Impl {
    Module module;
    const LoweredFunc *entry = nullptr;
    std::unique_ptr<llvm::orc::LLJIT> jit;
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

int JITModule::run(const std::string &function, void **args) const {
    using Argv = int (*)(void **);
    auto fn = reinterpret_cast<Argv>(symbol(function + "_argv"));
    user_assert(fn) << "the module has no pipeline function '" << function << "'";
    return fn(args);
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

    auto tm = host_target_machine(opts.opt_level);
    auto ctx = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> m =
        codegen_host(impl->module, *ctx, *tm, compile_kernels(impl->module));
    optimize_module(*m, *tm, opts.opt_level);

    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
        user_error << "cannot target the host: " << llvm_error(jtmb.takeError());
    }
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) {
        user_error << "cannot create the JIT: " << llvm_error(jit.takeError());
    }
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
        auto sym = impl->jit->lookup(f->name + "_argv");
        if (!sym) {
            user_error << "JIT compilation of '" << f->name
                       << "' failed: " << llvm_error(sym.takeError());
        }
    }
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
    h << "/* Generated by tallyc for target " << lowered.target.to_string() << ". */\n"
      << "#ifndef " << guard << "\n#define " << guard << "\n\n"
      << "#include <stdint.h>\n\n#include \"tally_runtime.h\"\n\n"
      << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
    for (const LoweredFunc *f : pipeline_functions(lowered)) {
        auto c_type = [](const Type &t) -> std::string {
            if (t.is_handle()) {
                return "void *";
            }
            if (t.is_float()) {
                return t.bits() == 64 ? "double" : t.bits() == 32 ? "float" : "uint16_t";
            }
            if (t.is_bool()) {
                return "bool";
            }
            return std::string(t.is_uint() ? "uint" : "int") + std::to_string(t.bits()) + "_t";
        };
        h << "/** Runs the pipeline; returns 0 or a negative tally_error_code_t. */\n"
          << "int " << f->name << "(";
        for (size_t i = 0; i < f->args.size(); i++) {
            const Argument &a = f->args[i];
            h << (i ? ", " : "")
              << (a.is_buffer() ? "halide_buffer_t *"
                                : c_type(a.type.is_valid() ? a.type : Int(32)) + " ");
            std::string n = a.name;
            for (char &c : n) {
                c = std::isalnum((unsigned char)c) ? c : '_';
            }
            h << n;
        }
        if (f->args.empty()) {
            h << "void";
        }
        h << ");\n\n/** The same, with arguments as an array: buffers as halide_buffer_t *, "
             "scalars by pointer. */\nint "
          << f->name << "_argv(void **args);\n\n";
    }
    h << "#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n#endif\n";
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
    auto tm = host_target_machine(opts.opt_level);
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
    if (out.object.empty() && out.llvm_ir.empty()) {
        return;
    }
    auto tm = host_target_machine(opts.opt_level);
    llvm::LLVMContext ctx;
    auto m = optimized(lowered, ctx, *tm, opts.opt_level);
    if (!out.llvm_ir.empty()) {
        std::string s;
        llvm::raw_string_ostream os(s);
        m->print(os, nullptr);
        write_text(out.llvm_ir, s);
    }
    if (!out.object.empty()) {
        std::error_code ec;
        llvm::raw_fd_ostream os(out.object, ec, llvm::sys::fs::OF_None);
        user_assert(!ec) << out.object << ": error: cannot write file: " << ec.message();
        llvm::legacy::PassManager pm;
        user_assert(!tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
            << "the target cannot emit object files";
        pm.run(*m);
        os.flush();
        user_assert(!os.has_error()) << out.object << ": error: write failed";
    }
}

void compile_to_files(const Module &lowered, const OutputFiles &out, const CompileOptions &opts) {
    with_large_stack([&]() { compile_to_files_impl(lowered, out, opts); });
}

std::string compile_to_ptx(const Module &lowered) {
    return compile_ptx_module(lowered);
}

}  // namespace tally
