// The CUDA back end: a Kernel (what offload-gpu-loops made of a gpu_block nest) to PTX text with
// LLVM's NVPTX target.
//
// Interface (tally_kernel_source in tally_runtime.h): each kernel becomes one `.visible .entry`
// function `void name(ptr addrspace(1) noalias buf..., scalar...)`: the buffers come first, as
// global-memory pointers to the element Load/Store index 0 names (the runtime passes buf->device,
// moved to where buf->host sits in the buffer's span), then the scalars by value, in the kernel's
// argument order. Bool scalars arrive as one byte. The function has calling convention PTX_Kernel
// and the nvvm.annotations "kernel" mark (LLVM 19 reads the latter).
//
// Loops: gpu_block and gpu_thread loops are not loops on the device. A gpu_block loop's variable
// is min + %ctaid.<d>, a gpu_thread loop's min + %tid.<d>, where <d> is the loop's dimension in
// the kernel's geometry (Kernel::geometry, decided by offload-gpu-loops). A loop whose extent is
// not exactly its dimension's launch size is guarded with `id < extent`. Every
// other loop kind runs serially. Allocations in GPUShared memory, or outside every gpu_thread loop
// of a kernel that has thread loops, are per-block `.shared` arrays; others are per-thread local
// arrays. Both need a constant size.
//
// Values, loads, stores, scopes and serial loops are CodeGen_LLVM's (CodeGen_LLVM.h), shared with
// the host, with the semantics IR.h states (NVPTX splits vector accesses it cannot do in one
// instruction); this file adds what a device has of its own. Math calls (Halide's
// sqrt_f32 and libm's sqrtf spellings alike): what PTX does exactly in one instruction (sqrt,
// floor, ceil, trunc, round-to-even, fabs) is an LLVM intrinsic (sqrt.rn.f32, cvt.rmi, ...); the
// rest calls libdevice (__nv_expf, __nv_sin, ...), linked from libdevice.10.bc when the CUDA
// toolkit's copy is found, and is a CompileError naming the function without it. Nodes that mean
// nothing on a device (asserts, strings, extern calls other than math, heap allocations) are
// CompileErrors naming the node and the kernel.
//
// Pipeline: build the module (triple nvptx64-nvidia-cuda, data layout of the NVPTX target
// machine), link libdevice if any __nv_ function is used (only what is needed; everything but the
// kernels internalized), run LLVM's O3 pipeline for the target machine (which also resolves
// libdevice's __nvvm_reflect queries; flush-to-zero is off), then the NVPTX AsmPrinter. Compute
// capability: sm_75, or the highest cuda_capability_XX feature the target names.
//
// Environment: TALLY_LIBDEVICE=<path> names libdevice.10.bc (empty or "none": do without);
// TALLY_DUMP_PTX=<dir> writes each kernel's PTX to <dir>/<kernel>.ptx.

#include "codegen/CodeGen_PTX.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <llvm/ADT/SmallString.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include "codegen/Analysis.h"
#include "codegen/CodeGen_LLVM.h"
#include "ir/LargeStack.h"
#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

const char *const nvptx_triple = "nvptx64-nvidia-cuda";

constexpr unsigned global_as = 1, shared_as = 3;

void init_nvptx() {
    static std::once_flag once;
    std::call_once(once, []() {
        LLVMInitializeNVPTXTargetInfo();
        LLVMInitializeNVPTXTarget();
        LLVMInitializeNVPTXTargetMC();
        LLVMInitializeNVPTXAsmPrinter();
    });
}

/** "sm_XX": the highest cuda_capability_XX feature of the target, else sm_75. */
std::string cuda_arch(const Target &t) {
    static const std::pair<Target::Feature, int> capabilities[] = {
        {Target::CUDACapability90, 90}, {Target::CUDACapability89, 89},
        {Target::CUDACapability86, 86}, {Target::CUDACapability80, 80},
        {Target::CUDACapability75, 75}, {Target::CUDACapability70, 70},
        {Target::CUDACapability61, 61}, {Target::CUDACapability50, 50},
        {Target::CUDACapability35, 35}, {Target::CUDACapability32, 32},
        {Target::CUDACapability30, 30},
    };
    for (const auto &[feature, sm] : capabilities) {
        if (t.has_feature(feature)) {
            return "sm_" + std::to_string(sm);
        }
    }
    return "sm_75";
}

std::unique_ptr<llvm::TargetMachine> nvptx_target_machine(const std::string &arch) {
    init_nvptx();
    std::string err;
    const llvm::Target *target = llvm::TargetRegistry::lookupTarget(nvptx_triple, err);
    internal_assert(target) << "the NVPTX target is not linked in: " << err;
    llvm::TargetOptions options;
    std::unique_ptr<llvm::TargetMachine> tm(
        target->createTargetMachine(nvptx_triple, arch, "", options, std::nullopt, std::nullopt,
                                    llvm::CodeGenOptLevel::Aggressive));
    internal_assert(tm) << "cannot create an NVPTX target machine for " << arch;
    return tm;
}

bool file_exists(const std::string &p) {
    std::ifstream f(p, std::ios::binary);
    return f.good();
}

/** libdevice.10.bc: $TALLY_LIBDEVICE ("none" disables it; empty is unset, as for every variable,
 * docs/environment.md), else the CUDA toolkit's copy under $CUDA_HOME, $CUDA_PATH,
 * /usr/local/cuda or Debian's nvidia-cuda-toolkit. Empty if none. */
std::string libdevice_path() {
    if (const char *env = std::getenv("TALLY_LIBDEVICE"); env && *env) {
        std::string p = env;
        if (p == "none") {
            return "";
        }
        user_assert(file_exists(p)) << "TALLY_LIBDEVICE names '" << p << "', which cannot be read";
        return p;
    }
    std::vector<std::string> candidates;
    for (const char *var : {"CUDA_HOME", "CUDA_PATH"}) {
        if (const char *root = std::getenv(var)) {
            candidates.push_back(std::string(root) + "/nvvm/libdevice/libdevice.10.bc");
        }
    }
    candidates.push_back("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc");
    candidates.push_back("/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc");
    for (const std::string &c : candidates) {
        if (file_exists(c)) {
            return c;
        }
    }
    return "";
}

class PtxCodeGen final : public CodeGen_LLVM {
public:
    PtxCodeGen(llvm::Module &m, bool have_libdevice)
        : CodeGen_LLVM(m.getContext()), have_libdevice(have_libdevice) {
        mod = &m;
    }

    /** Indices stay 32-bit in kernels, as Halide 14's PTX back end keeps them. */
    bool promote_indices() const override { return false; }

    /** Adds the kernel's entry function to the module. */
    void define_kernel(const Kernel &k) {
        kernel = &k;

        std::vector<llvm::Type *> params;
        for (const Argument &a : k.args) {
            params.push_back(a.is_buffer() ? builder.getPtrTy(global_as) : param_type(a));
        }
        llvm::FunctionType *ft = llvm::FunctionType::get(builder.getVoidTy(), params, false);
        user_assert(!mod->getFunction(k.name))
            << "PTX back end: two kernels are named '" << k.name << "'";
        fn = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, k.name, mod);
        fn->setCallingConv(llvm::CallingConv::PTX_Kernel);
        fn->addFnAttr(llvm::Attribute::NoUnwind);
        llvm::NamedMDNode *annotations = mod->getOrInsertNamedMetadata("nvvm.annotations");
        annotations->addOperand(llvm::MDNode::get(
            ctx, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx, "kernel"),
                  llvm::ValueAsMetadata::get(builder.getInt32(1))}));

        llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx, "entry", fn);
        builder.SetInsertPoint(entry);
        for (size_t i = 0; i < k.args.size(); i++) {
            const Argument &a = k.args[i];
            llvm::Argument *arg = fn->getArg(i);
            arg->setName(a.name);
            if (a.is_buffer()) {
                // Distinct buffers never overlap (as in Halide's PTX back end): lets NVPTX read
                // buffers the kernel only reads through the non-coherent cache.
                fn->addParamAttr(i, llvm::Attribute::NoAlias);
                push_buffer(a.name, arg);
                continue;
            }
            llvm::Value *v = arg;
            Type t = a.type.is_valid() ? a.type : Int(32);
            if (t.is_bool()) {
                v = builder.CreateTrunc(v, i1);
            }
            push_var(a.name, v);
        }
        codegen(k.body);
        builder.CreateRetVoid();
        vars.clear();
        buffers.clear();
        kernel = nullptr;
        fn = nullptr;
    }

    /** Did the kernels call libdevice? */
    bool uses_libdevice() const { return used_libdevice; }

    using CodeGen_LLVM::visit;

private:
    bool have_libdevice;
    bool used_libdevice = false;

    const Kernel *kernel = nullptr;
    int thread_loop_depth = 0;

    [[noreturn]] void unsupported(const std::string &what) override {
        user_error << "PTX back end: kernel '" << kernel->name << "': " << what
                   << " cannot be compiled for a CUDA device";
        std::abort();  // not reached: user_error throws
    }
    llvm::Value *unbound_var(const std::string &n) override {
        unsupported("variable '" + n + "', which is not bound in the kernel,");
    }
    llvm::Value *unbound_buffer(const std::string &n) override {
        unsupported("access to '" + n + "', which names no buffer of the kernel,");
    }

    /** A scalar parameter: its type, except that bools travel as a byte. */
    llvm::Type *param_type(const Argument &a) {
        Type t = a.type.is_valid() ? a.type : Int(32);
        if (t.is_vector()) {
            unsupported("vector argument '" + a.name + "'");
        }
        return t.is_bool() ? i8 : llvm_type(t);
    }

    // --- calls ----------------------------------------------------------------------------

    /** A libdevice function `__nv_<name>` taking and returning `t` (scalar float). */
    llvm::Value *call_libdevice(const std::string &name, llvm::Type *t,
                                const std::vector<llvm::Value *> &args) {
        std::vector<llvm::Type *> params(args.size(), t);
        llvm::FunctionCallee f =
            mod->getOrInsertFunction(name, llvm::FunctionType::get(t, params, false));
        used_libdevice = true;
        return builder.CreateCall(f, args);
    }

    /** Applies a scalar function to every lane of the (vector or scalar) arguments. */
    template <typename F>
    llvm::Value *per_lane(const std::vector<llvm::Value *> &args, F scalar_fn) {
        auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(args[0]->getType());
        if (!vt) {
            return scalar_fn(args);
        }
        llvm::Value *result = llvm::UndefValue::get(vt);
        for (unsigned i = 0; i < vt->getNumElements(); i++) {
            std::vector<llvm::Value *> lanes;
            for (llvm::Value *a : args) {
                lanes.push_back(builder.CreateExtractElement(a, builder.getInt32(i)));
            }
            result = builder.CreateInsertElement(result, scalar_fn(lanes), builder.getInt32(i));
        }
        return result;
    }

    /** Halide's math functions (sqrt_f32, pow_f64, ...) and libm's spellings (sqrtf, sqrt).
     * Returns false if `op` is not one. */
    bool call_math(const Call *op) {
        // name -> {libdevice base name, arity, LLVM intrinsic NVPTX selects natively or 0}
        struct MathFn {
            const char *libdevice;
            int arity;
            llvm::Intrinsic::ID native;
        };
        static const std::map<std::string, MathFn> fns = {
            {"sqrt", {"sqrt", 1, llvm::Intrinsic::sqrt}},
            {"floor", {"floor", 1, llvm::Intrinsic::floor}},
            {"ceil", {"ceil", 1, llvm::Intrinsic::ceil}},
            {"trunc", {"trunc", 1, llvm::Intrinsic::trunc}},
            {"fabs", {"fabs", 1, llvm::Intrinsic::fabs}},
            // Halide's round is round-half-to-even: rint, not libm's round.
            {"round", {"rint", 1, llvm::Intrinsic::roundeven}},
            {"sin", {"sin", 1, 0}},
            {"cos", {"cos", 1, 0}},
            {"tan", {"tan", 1, 0}},
            {"asin", {"asin", 1, 0}},
            {"acos", {"acos", 1, 0}},
            {"atan", {"atan", 1, 0}},
            {"sinh", {"sinh", 1, 0}},
            {"cosh", {"cosh", 1, 0}},
            {"tanh", {"tanh", 1, 0}},
            {"asinh", {"asinh", 1, 0}},
            {"acosh", {"acosh", 1, 0}},
            {"atanh", {"atanh", 1, 0}},
            {"exp", {"exp", 1, 0}},
            {"exp2", {"exp2", 1, 0}},
            {"log", {"log", 1, 0}},
            {"log2", {"log2", 1, 0}},
            {"log10", {"log10", 1, 0}},
            {"erf", {"erf", 1, 0}},
            {"pow", {"pow", 2, 0}},
            {"atan2", {"atan2", 2, 0}},
            {"hypot", {"hypot", 2, 0}},
            {"fmod", {"fmod", 2, 0}},
        };
        if (!op->type.is_float() && op->name.compare(0, 3, "is_") != 0) {
            return false;
        }
        std::string n =
            math_base_name(op->name, [&](const std::string &base) { return fns.count(base); });
        // Classification and reciprocals need no library.
        if ((n == "is_nan" || n == "is_inf" || n == "is_finite") && op->args.size() == 1 &&
            op->args[0].type().is_float()) {
            llvm::Value *x = codegen(op->args[0]);
            llvm::Value *inf = llvm::ConstantFP::getInfinity(x->getType());
            llvm::Value *ax = builder.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
            value = n == "is_nan"   ? builder.CreateFCmpUNO(x, x)
                    : n == "is_inf" ? builder.CreateFCmpOEQ(ax, inf)
                                    : builder.CreateFCmpOLT(ax, inf);
            return true;
        }
        if ((n == "fast_inverse" || n == "fast_inverse_sqrt") && op->args.size() == 1 &&
            op->type.is_float()) {
            llvm::Value *x = codegen(op->args[0]);
            if (n == "fast_inverse_sqrt") {
                x = builder.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
            }
            value = builder.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), x);
            return true;
        }
        auto it = fns.find(n);
        if (it == fns.end() || int(op->args.size()) != it->second.arity) {
            return false;
        }
        const MathFn &m = it->second;
        std::vector<llvm::Value *> args;
        for (const Expr &a : op->args) {
            user_assert(a.type().element_of() == op->type.element_of())
                << "PTX back end: kernel '" << kernel->name << "': " << op->name << " of "
                << a.type().to_string() << " returning " << op->type.to_string();
            args.push_back(codegen(a));
        }
        Type et = op->type.element_of();
        // What PTX does exactly in one instruction stays an intrinsic: sqrt.rn, cvt.rmi, ...
        // (libdevice's __nv_sqrtf would be sqrt.approx: LLVM's NVVMReflect answers 0 to its
        // __CUDA_PREC_SQRT query).
        if (m.native) {
            // 16-bit floats (half, bfloat) go through float32.
            bool narrow = et.bits() == 16;
            llvm::Value *x = args[0];
            if (narrow) {
                x = builder.CreateFPExt(x, llvm_type(Float(32, op->type.lanes())));
            }
            llvm::Value *r = builder.CreateUnaryIntrinsic(m.native, x);
            value = narrow ? builder.CreateFPTrunc(r, llvm_type(op->type)) : r;
            return true;
        }
        if (!have_libdevice) {
            unsupported("'" + op->name +
                        "' (it needs libdevice.10.bc from the CUDA toolkit; none was found, set "
                        "TALLY_LIBDEVICE to its path)");
        }
        // libdevice has f32 (`__nv_sinf`) and f64 (`__nv_sin`) versions; f16 goes through f32.
        bool f16 = et.bits() == 16;
        if (et.code() == Type::BFloat) {
            unsupported("'" + op->name + "' of bfloat16");
        }
        std::string name = std::string("__nv_") + m.libdevice + (et.bits() == 64 ? "" : "f");
        llvm::Type *ct = et.bits() == 64 ? builder.getDoubleTy() : builder.getFloatTy();
        value = per_lane(args, [&](const std::vector<llvm::Value *> &lanes) {
            std::vector<llvm::Value *> xs;
            for (llvm::Value *l : lanes) {
                xs.push_back(f16 ? builder.CreateFPExt(l, ct) : l);
            }
            llvm::Value *r = call_libdevice(name, ct, xs);
            return f16 ? builder.CreateFPTrunc(r, builder.getHalfTy()) : r;
        });
        return true;
    }

    void visit(const Call *op) override {
        if (op->is_intrinsic(Call::gpu_thread_barrier)) {
            builder.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
            value = llvm::Constant::getNullValue(llvm_type(op->type));
        } else if (call_pure_intrinsic(op)) {
            coerce_to_call_type(op);
        } else if (!call_math(op)) {
            unsupported(std::string(op->is_intrinsic() ? "the intrinsic '" : "the call to '") +
                        op->name + "'");
        }
    }

    // --- statements -----------------------------------------------------------------------

    void visit(const Allocate *op) override {
        if (op->new_expr.defined()) {
            unsupported("the custom allocation of '" + op->name + "'");
        }
        if (op->condition.defined() && !is_const_one(op->condition)) {
            unsupported("the conditional allocation of '" + op->name + "'");
        }
        int64_t count = op->type.lanes();
        for (const Expr &e : op->extents) {
            int64_t v;
            if (!const_int_value(e, &v) || v <= 0) {
                unsupported("the allocation of '" + op->name + "' with non-constant size " +
                            to_string(e));
            }
            count *= v;
        }
        if (op->memory_type == MemoryType::Heap) {
            unsupported("the heap allocation of '" + op->name + "'");
        }
        llvm::Type *et = memory_type(op->type.element_of());
        llvm::ArrayType *at = llvm::ArrayType::get(et, count);
        bool shared = op->memory_type == MemoryType::GPUShared ||
                      (!kernel->geometry.threads.empty() && thread_loop_depth == 0);
        llvm::Value *base;
        if (shared) {
            if (count * op->type.bytes() > 48 * 1024) {
                unsupported("the shared allocation of '" + op->name + "' (" +
                            std::to_string(count * op->type.bytes()) +
                            " bytes, more than the 48 KiB of static shared memory)");
            }
            auto *g = new llvm::GlobalVariable(*mod, at, false, llvm::GlobalValue::InternalLinkage,
                                               llvm::UndefValue::get(at), op->name, nullptr,
                                               llvm::GlobalValue::NotThreadLocal, shared_as);
            g->setAlignment(llvm::Align(16));
            base = g;
        } else {
            if (count * op->type.bytes() > 64 * 1024) {
                unsupported("the allocation of '" + op->name + "' (" +
                            std::to_string(count * op->type.bytes()) + " bytes per thread)");
            }
            llvm::AllocaInst *a = entry_alloca(at, op->name);
            a->setAlignment(llvm::Align(16));
            base = a;
        }
        push_buffer(op->name, base);
        codegen(op->body);
        pop_buffer(op->name);
    }
    void visit(const Free *) override {}

    void visit(const For *op) override {
        if (is_gpu_loop(op)) {
            gpu_loop(op);
            return;
        }
        if (op->for_type == ForType::Parallel || op->for_type == ForType::GPULane) {
            unsupported(std::string("the ") + for_type_name(op->for_type) + " loop '" + op->name +
                        "'");
        }
        // Serial, unrolled, vectorized and extern loops run serially.
        serial_loop(op);
    }

    /** A gpu_block / gpu_thread loop: its variable is min + the block or thread id. */
    void gpu_loop(const For *op) {
        static const llvm::Intrinsic::ID ids[2][3] = {{llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                                       llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                                       llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z},
                                                      {llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x,
                                                       llvm::Intrinsic::nvvm_read_ptx_sreg_tid_y,
                                                       llvm::Intrinsic::nvvm_read_ptx_sreg_tid_z}};
        int kind = op->for_type == ForType::GPUBlock ? 0 : 1;
        int dim = kernel->geometry.dim(op);
        llvm::Value *min = codegen(op->min);
        llvm::Value *id = builder.CreateIntrinsic(ids[kind][dim], {}, {});
        id->setName(op->name + ".id");
        llvm::Type *t = min->getType();
        if (!t->isIntegerTy()) {
            unsupported(std::string("the ") + for_type_name(op->for_type) + " loop '" + op->name +
                        "' over " + op->min.type().to_string());
        }
        id = builder.CreateZExtOrTrunc(id, t);
        llvm::BasicBlock *after = nullptr;
        if (kernel->geometry.needs_guard(op)) {
            llvm::Value *extent = codegen(op->extent);
            llvm::BasicBlock *body = llvm::BasicBlock::Create(ctx, op->name + "_in", fn);
            after = llvm::BasicBlock::Create(ctx, op->name + "_out", fn);
            builder.CreateCondBr(builder.CreateICmpSLT(id, extent), body, after);
            builder.SetInsertPoint(body);
        }
        llvm::Value *v = builder.CreateAdd(min, id, op->name);
        push_var(op->name, v);
        thread_loop_depth += kind;
        codegen(op->body);
        thread_loop_depth -= kind;
        pop_var(op->name);
        if (after) {
            builder.CreateBr(after);
            builder.SetInsertPoint(after);
        }
    }
};

/** Links the libdevice functions the module calls, and internalizes everything but kernels. */
void link_libdevice(llvm::Module &m, const std::string &path) {
    auto buf = llvm::MemoryBuffer::getFile(path);
    user_assert(buf) << "PTX back end: cannot read libdevice '" << path
                     << "': " << buf.getError().message();
    auto lib = llvm::parseBitcodeFile((*buf)->getMemBufferRef(), m.getContext());
    if (!lib) {
        std::string err;
        llvm::raw_string_ostream os(err);
        os << lib.takeError();
        user_error << "PTX back end: cannot parse libdevice '" << path << "': " << err;
    }
    (*lib)->setTargetTriple(m.getTargetTriple());
    (*lib)->setDataLayout(m.getDataLayout());
    bool failed = llvm::Linker::linkModules(m, std::move(*lib), llvm::Linker::LinkOnlyNeeded);
    internal_assert(!failed) << "linking libdevice '" << path << "' failed";
    for (llvm::Function &f : m) {
        if (!f.isDeclaration() && f.getCallingConv() != llvm::CallingConv::PTX_Kernel) {
            f.setLinkage(llvm::GlobalValue::InternalLinkage);
        }
    }
    // libdevice asks __nvvm_reflect("__CUDA_FTZ"): no flush-to-zero, as on the host.
    m.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t(0));
}

/** PTX text for a set of kernels: one PTX module with one entry per kernel. */
std::string compile_ptx(const std::vector<const Kernel *> &kernels, const Target &target) {
    std::string arch = cuda_arch(target);
    std::unique_ptr<llvm::TargetMachine> tm = nvptx_target_machine(arch);
    llvm::LLVMContext ctx;
    llvm::Module mod(kernels.size() == 1 ? kernels[0]->name : "tally_kernels", ctx);
    mod.setTargetTriple(nvptx_triple);
    mod.setDataLayout(tm->createDataLayout());

    std::string libdevice = libdevice_path();
    PtxCodeGen cg(mod, !libdevice.empty());
    for (const Kernel *k : kernels) {
        cg.define_kernel(*k);
    }
    {
        std::string err;
        llvm::raw_string_ostream os(err);
        internal_assert(!llvm::verifyModule(mod, &os)) << "invalid LLVM IR generated: " << err;
    }
    if (cg.uses_libdevice()) {
        link_libdevice(mod, libdevice);
    }
    optimize_module(mod, *tm, 3);

    llvm::SmallString<0> ptx;
    llvm::raw_svector_ostream os(ptx);
    llvm::legacy::PassManager pm;
    internal_assert(!tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
        << "the NVPTX target cannot emit PTX";
    pm.run(mod);
    return std::string(ptx.str());
}

void dump_ptx(const std::string &name, const std::string &ptx) {
    const char *dir = std::getenv("TALLY_DUMP_PTX");
    if (!dir || !*dir) {
        return;
    }
    std::ofstream out(std::string(dir) + "/" + name + ".ptx", std::ios::binary);
    out << ptx;
}

}  // namespace

CompiledKernel compile_ptx_kernel(const Kernel &k, const Target &t) {
    user_assert(k.device_api == DeviceAPI::CUDA)
        << "PTX back end: kernel '" << k.name << "' is for " << device_api_name(k.device_api)
        << ", not CUDA";
    CompiledKernel out;
    out.name = k.name;
    out.device_api = DeviceAPI::CUDA;
    out.code = with_large_stack([&]() { return compile_ptx({&k}, t); });
    out.num_args = int(k.args.size());
    for (const Argument &a : k.args) {
        out.num_buffers += a.is_buffer() ? 1 : 0;
    }
    dump_ptx(k.name, out.code);
    return out;
}

std::string compile_ptx_module(const Module &lowered) {
    std::vector<const Kernel *> cuda;
    for (const Kernel &k : lowered.kernels) {
        if (k.device_api == DeviceAPI::CUDA) {
            cuda.push_back(&k);
        }
    }
    if (cuda.empty()) {
        return "";
    }
    return with_large_stack([&]() { return compile_ptx(cuda, lowered.target); });
}

}  // namespace tally