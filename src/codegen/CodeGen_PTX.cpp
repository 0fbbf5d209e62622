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
// is min + %ctaid.<d>, a gpu_thread loop's min + %tid.<d>, where <d> follows offload-gpu-loops'
// rule (along a chain of nested loops of one kind the innermost is x, then y, then z). The launch
// size of a dimension is the largest extent filed there (constants fold, others combine with
// max), so a loop whose extent is not exactly that size is guarded with `id < extent`. Every
// other loop kind runs serially. Allocations in GPUShared memory, or outside every gpu_thread loop
// of a kernel that has thread loops, are per-block `.shared` arrays; others are per-thread local
// arrays. Both need a constant size.
//
// Values lower as in CodeGen_Host.cpp, with the semantics IR.h states: integer Div/Mod are
// Euclidean with x/0 == x%0 == 0 (the same case analysis, in selects), bools are bytes in memory,
// dense vector loads and stores are LLVM vector accesses (NVPTX splits what it cannot do in one
// instruction), other vector accesses and predicated ones go lane by lane. Math calls (Halide's
// sqrt_f32 and libm's sqrtf spellings alike): what PTX does exactly in one instruction (sqrt,
// floor, ceil, trunc, round-to-even, fabs) is an LLVM intrinsic (sqrt.rn.f32, cvt.rmi, ...); the
// rest calls libdevice (__nv_expf, __nv_sin, ...), linked from libdevice.10.bc when the CUDA
// toolkit's copy is found, and is a CompileError naming the function without it. Nodes that mean
// nothing on a device (asserts, strings, extern calls other than math, heap allocations) are
// CompileErrors naming the node and the kernel.
//
// The expression lowering is written again here rather than shared with CodeGen_Host: the host
// generator is built around host concerns (a single exit with destructors, closures, runtime
// calls with user_context), and the subset a kernel needs is small enough to keep readable.
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
#include "codegen/LLVMArith.h"

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

#include "ir/LargeStack.h"
#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/IREquality.h"
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
    int best = 0;
    const std::string prefix = "cuda_capability_";
    for (const std::string &f : t.features) {
        if (f.compare(0, prefix.size(), prefix) == 0) {
            best = std::max(best, std::atoi(f.c_str() + prefix.size()));
        }
    }
    return "sm_" + std::to_string(best ? best : 75);
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

/** libdevice.10.bc: $TALLY_LIBDEVICE (empty or "none" disables it), else the CUDA toolkit's copy
 * under $CUDA_HOME, $CUDA_PATH, /usr/local/cuda or Debian's nvidia-cuda-toolkit. Empty if none. */
std::string libdevice_path() {
    if (const char *env = std::getenv("TALLY_LIBDEVICE")) {
        std::string p = env;
        if (p.empty() || p == "none") {
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

bool is_gpu_loop(const For *op) {
    return op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread;
}

/** For every gpu_block / gpu_thread loop of a kernel: its dimension (0 = x) by offload-gpu-loops'
 * rule, and whether its extent may be smaller than the launch size of that dimension. Also
 * whether the kernel has thread loops at all (allocations outside them are per-block). */
class GpuLoopDims : public IRVisitor {
public:
    explicit GpuLoopDims(std::string kernel) : kernel(std::move(kernel)) {}

    std::map<const For *, int> dims;
    bool has_thread_loops = false;

    /** Does the loop need an `id < extent` guard? */
    bool needs_guard(const For *op) const {
        int kind = op->for_type == ForType::GPUBlock ? 0 : 1;
        const std::vector<Expr> &slot = extents[kind][dims.at(op)];
        Expr e = launch_extent(op);
        // One distinct extent: the launch is exactly it.
        if (slot.size() == 1) {
            return false;
        }
        // All constant: the launch is the largest.
        int64_t largest = 0, v;
        for (const Expr &c : slot) {
            if (!const_int_value(c, &v)) {
                return true;
            }
            largest = std::max(largest, v);
        }
        return !(const_int_value(e, &v) && v == largest);
    }

    using IRVisitor::visit;

private:
    std::string kernel;
    // Per kind, a stack of the open loops' lists of nearest same-kind descendants' depths.
    std::vector<std::vector<int>> below[2];
    // Per kind and dimension, the distinct extents (as int32, as the launch uses them).
    std::vector<Expr> extents[2][3];

    static Expr launch_extent(const For *op) {
        return op->extent.type() == Int(32) ? op->extent : Cast::make(Int(32), op->extent);
    }

    void visit(const For *op) override {
        if (!is_gpu_loop(op)) {
            IRVisitor::visit(op);
            return;
        }
        int kind = op->for_type == ForType::GPUBlock ? 0 : 1;
        has_thread_loops = has_thread_loops || kind == 1;
        below[kind].emplace_back();
        IRVisitor::visit(op);
        std::vector<int> inner = below[kind].back();
        below[kind].pop_back();
        int mine = inner.empty() ? 0 : inner[0] + 1;
        for (int d : inner) {
            user_assert(d + 1 == mine)
                << "PTX back end: kernel '" << kernel << "': " << for_type_name(op->for_type)
                << " loop '" << op->name
                << "' has nested loop chains of different depths below it, so its launch "
                   "dimension is ambiguous";
        }
        user_assert(mine < 3) << "PTX back end: kernel '" << kernel << "': more than 3 nested "
                              << for_type_name(op->for_type) << " loops around '" << op->name
                              << "'";
        dims[op] = mine;
        if (!below[kind].empty()) {
            below[kind].back().push_back(mine);
        }
        Expr e = launch_extent(op);
        std::vector<Expr> &slot = extents[kind][mine];
        bool known = false;
        for (const Expr &o : slot) {
            known = known || equal(o, e);
        }
        if (!known) {
            slot.push_back(e);
        }
    }
};

class PtxCodeGen : public IRVisitor {
public:
    PtxCodeGen(llvm::Module &mod, bool have_libdevice)
        : mod(mod), ctx(mod.getContext()), builder(ctx), have_libdevice(have_libdevice) {
        i1 = builder.getInt1Ty();
        i8 = builder.getInt8Ty();
        i32 = builder.getInt32Ty();
        i64 = builder.getInt64Ty();
    }

    /** Adds the kernel's entry function to the module. */
    void define_kernel(const Kernel &k) {
        kernel = &k;
        GpuLoopDims dims_of(k.name);
        k.body.accept(&dims_of);
        loops = &dims_of;

        std::vector<llvm::Type *> params;
        for (const Argument &a : k.args) {
            params.push_back(a.is_buffer() ? builder.getPtrTy(global_as) : param_type(a));
        }
        llvm::FunctionType *ft = llvm::FunctionType::get(builder.getVoidTy(), params, false);
        user_assert(!mod.getFunction(k.name))
            << "PTX back end: two kernels are named '" << k.name << "'";
        fn = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, k.name, &mod);
        fn->setCallingConv(llvm::CallingConv::PTX_Kernel);
        fn->addFnAttr(llvm::Attribute::NoUnwind);
        llvm::NamedMDNode *annotations = mod.getOrInsertNamedMetadata("nvvm.annotations");
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
        loops = nullptr;
        kernel = nullptr;
    }

    /** Did the kernels call libdevice? */
    bool uses_libdevice() const { return used_libdevice; }

private:
    llvm::Module &mod;
    llvm::LLVMContext &ctx;
    llvm::IRBuilder<> builder;
    bool have_libdevice;
    bool used_libdevice = false;
    llvm::Type *i1, *i8, *i32, *i64;

    const Kernel *kernel = nullptr;
    const GpuLoopDims *loops = nullptr;
    llvm::Function *fn = nullptr;
    int thread_loop_depth = 0;
    std::map<std::string, std::vector<llvm::Value *>> vars;
    std::map<std::string, std::vector<llvm::Value *>> buffers;  // base pointers, any addrspace
    llvm::Value *value = nullptr;

    [[noreturn]] void unsupported(const std::string &what) {
        user_error << "PTX back end: kernel '" << kernel->name << "': " << what
                   << " cannot be compiled for a CUDA device";
        std::abort();  // not reached: user_error throws
    }

    // --- types ----------------------------------------------------------------------------

    llvm::Type *scalar_type(const Type &t) {
        if (t.is_handle()) {
            return builder.getPtrTy();
        }
        if (t.is_float()) {
            if (t.code() == Type::BFloat) {
                return builder.getBFloatTy();
            }
            return t.bits() == 16   ? builder.getHalfTy()
                   : t.bits() == 32 ? builder.getFloatTy()
                                    : builder.getDoubleTy();
        }
        return builder.getIntNTy(t.bits());
    }
    llvm::Type *llvm_type(const Type &t) {
        llvm::Type *s = scalar_type(t.element_of());
        return t.is_vector() ? llvm::FixedVectorType::get(s, t.lanes()) : s;
    }
    /** In memory, bools take a byte. */
    llvm::Type *memory_type(const Type &t) {
        return t.is_bool() ? (t.is_vector() ? llvm::FixedVectorType::get(i8, t.lanes()) : i8)
                           : llvm_type(t);
    }
    /** A scalar parameter: its type, except that bools travel as a byte. */
    llvm::Type *param_type(const Argument &a) {
        Type t = a.type.is_valid() ? a.type : Int(32);
        if (t.is_vector()) {
            unsupported("vector argument '" + a.name + "'");
        }
        return t.is_bool() ? i8 : llvm_type(t);
    }

    // --- scopes ---------------------------------------------------------------------------

    static void push(std::map<std::string, std::vector<llvm::Value *>> &m, const std::string &n,
                     llvm::Value *v) {
        m[n].push_back(v);
    }
    static void pop(std::map<std::string, std::vector<llvm::Value *>> &m, const std::string &n) {
        auto it = m.find(n);
        it->second.pop_back();
        if (it->second.empty()) {
            m.erase(it);
        }
    }
    void push_var(const std::string &n, llvm::Value *v) { push(vars, n, v); }
    void pop_var(const std::string &n) { pop(vars, n); }
    void push_buffer(const std::string &n, llvm::Value *v) { push(buffers, n, v); }
    void pop_buffer(const std::string &n) { pop(buffers, n); }

    llvm::Value *lookup_var(const std::string &n) {
        auto it = vars.find(n);
        if (it == vars.end()) {
            unsupported("variable '" + n + "', which is not bound in the kernel,");
        }
        return it->second.back();
    }
    /** The memory a Load/Store name refers to: an allocation or buffer argument, else a handle
     * variable of that name. */
    llvm::Value *buffer_base(const std::string &n) {
        auto b = buffers.find(n);
        if (b != buffers.end()) {
            return b->second.back();
        }
        auto v = vars.find(n);
        if (v != vars.end() && v->second.back()->getType()->isPointerTy()) {
            return v->second.back();
        }
        unsupported("access to '" + n + "', which names no buffer of the kernel,");
    }

    // --- expressions ----------------------------------------------------------------------

    llvm::Value *codegen(const Expr &e) {
        internal_assert(e.defined()) << "codegen of undefined expression";
        value = nullptr;
        e.accept(this);
        internal_assert(value) << "no value for " << e;
        return value;
    }

    void visit(const IntImm *op) override {
        value = llvm::ConstantInt::getSigned(llvm_type(op->type), op->value);
    }
    void visit(const UIntImm *op) override {
        value = llvm::ConstantInt::get(llvm_type(op->type), op->value);
    }
    void visit(const FloatImm *op) override {
        value = llvm::ConstantFP::get(llvm_type(op->type), op->value);
    }
    void visit(const StringImm *op) override { unsupported("the string \"" + op->value + "\""); }

    llvm::Value *cast_value(llvm::Value *v, const Type &from, const Type &to) {
        return emit_cast(builder, v, from, to, llvm_type(to));
    }

    void visit(const Cast *op) override {
        value = cast_value(codegen(op->value), op->value.type(), op->type);
    }
    void visit(const Reinterpret *op) override {
        llvm::Value *v = codegen(op->value);
        const Type &from = op->value.type(), &to = op->type;
        if (to.is_handle() && !from.is_handle()) {
            value = builder.CreateIntToPtr(v, llvm_type(to));
        } else if (from.is_handle() && !to.is_handle()) {
            value = builder.CreatePtrToInt(v, llvm_type(to));
        } else {
            value = builder.CreateBitCast(v, llvm_type(to));
        }
    }
    void visit(const Variable *op) override {
        value = lookup_var(op->name);
        internal_assert(op->type.is_handle() || value->getType()->isPointerTy() ||
                        value->getType() == llvm_type(op->type))
            << "variable " << op->name << " used with another type";
    }

    void visit(const Add *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFAdd(a, b) : builder.CreateAdd(a, b);
    }
    void visit(const Sub *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFSub(a, b) : builder.CreateSub(a, b);
    }
    void visit(const Mul *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFMul(a, b) : builder.CreateMul(a, b);
    }

    void visit(const Div *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        if (op->type.is_float()) {
            value = builder.CreateFDiv(a, b);
            return;
        }
        llvm::Value *q, *r;
        emit_div_mod(builder, op->type, a, b, &q, &r);
        value = q;
    }
    void visit(const Mod *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        if (op->type.is_float()) {
            value = emit_float_mod(builder, a, b);
            return;
        }
        llvm::Value *q, *r;
        emit_div_mod(builder, op->type, a, b, &q, &r);
        value = r;
    }

    llvm::Value *compare(IRNodeType k, const Type &t, llvm::Value *a, llvm::Value *b) {
        return emit_compare(builder, k, t, a, b);
    }

    void visit(const Min *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateSelect(compare(IRNodeType::LT, op->type, a, b), a, b);
    }
    void visit(const Max *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateSelect(compare(IRNodeType::GT, op->type, a, b), a, b);
    }
#define TALLY_CMP(N)                                                                               \
    void visit(const N *op) override {                                                             \
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);                                      \
        value = compare(IRNodeType::N, op->a.type(), a, b);                                        \
    }
    TALLY_CMP(EQ)
    TALLY_CMP(NE)
    TALLY_CMP(LT)
    TALLY_CMP(LE)
    TALLY_CMP(GT)
    TALLY_CMP(GE)
#undef TALLY_CMP
    void visit(const And *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateAnd(a, b);
    }
    void visit(const Or *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateOr(a, b);
    }
    void visit(const Not *op) override {
        value = builder.CreateNot(codegen(op->a));
    }
    void visit(const Select *op) override {
        llvm::Value *c = codegen(op->condition);
        llvm::Value *t = codegen(op->true_value), *f = codegen(op->false_value);
        value = builder.CreateSelect(c, t, f);
    }

    /** Address of element `index` (scalar) of buffer `name`. */
    llvm::Value *element_address(const std::string &name, const Type &elem, llvm::Value *index) {
        llvm::Value *base = buffer_base(name);
        return builder.CreateInBoundsGEP(memory_type(elem), base,
                                         builder.CreateSExtOrTrunc(index, i64));
    }

    llvm::Value *load_scalar(const std::string &name, const Type &t, llvm::Value *index) {
        llvm::Value *v = builder.CreateLoad(memory_type(t), element_address(name, t, index));
        return t.is_bool() ? builder.CreateTrunc(v, i1) : v;
    }

    /** A dense vector access `ramp(base, 1, lanes)`: its base, else nullptr. */
    static const Expr *dense_base(const Expr &index) {
        const Ramp *r = index.as<Ramp>();
        if (r && is_const_one(r->stride) && r->base.type().is_scalar()) {
            return &r->base;
        }
        return nullptr;
    }

    /** Runs `body` only when `cond` holds, in its own block; returns the block it ended in. */
    template <typename F>
    llvm::BasicBlock *when(llvm::Value *cond, F body, llvm::BasicBlock **done_out) {
        llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "lane", fn);
        llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "lane_done", fn);
        builder.CreateCondBr(cond, yes, done);
        builder.SetInsertPoint(yes);
        body();
        llvm::BasicBlock *end = builder.GetInsertBlock();
        builder.CreateBr(done);
        builder.SetInsertPoint(done);
        *done_out = done;
        return end;
    }

    void visit(const Load *op) override {
        const Type &t = op->type;
        if (t.is_scalar() && !op->predicate.defined()) {
            value = load_scalar(op->name, t, codegen(op->index));
            return;
        }
        const Expr *dense = op->predicate.defined() ? nullptr : dense_base(op->index);
        if (dense) {
            llvm::Value *addr = element_address(op->name, t.element_of(), codegen(*dense));
            llvm::Value *v = builder.CreateAlignedLoad(memory_type(t), addr,
                                                       llvm::Align(t.element_of().bytes()));
            value = t.is_bool() ? builder.CreateTrunc(v, llvm_type(t)) : v;
            return;
        }
        // Gather lane by lane (only lanes whose predicate holds are read).
        llvm::Value *idx = codegen(op->index);
        llvm::Value *pred = op->predicate.defined() ? codegen(op->predicate) : nullptr;
        llvm::Value *result = llvm::UndefValue::get(llvm_type(t));
        for (int i = 0; i < t.lanes(); i++) {
            llvm::Value *li =
                t.is_vector() ? builder.CreateExtractElement(idx, builder.getInt32(i)) : idx;
            llvm::Value *lane;
            if (pred) {
                llvm::Value *p =
                    t.is_vector() ? builder.CreateExtractElement(pred, builder.getInt32(i)) : pred;
                llvm::BasicBlock *cur = builder.GetInsertBlock(), *done;
                llvm::Value *lv = nullptr;
                llvm::BasicBlock *yes_end = when(
                    p, [&]() { lv = load_scalar(op->name, t.element_of(), li); }, &done);
                llvm::PHINode *phi = builder.CreatePHI(scalar_type(t.element_of()), 2);
                phi->addIncoming(llvm::Constant::getNullValue(phi->getType()), cur);
                phi->addIncoming(lv, yes_end);
                lane = phi;
            } else {
                lane = load_scalar(op->name, t.element_of(), li);
            }
            result = t.is_vector() ? builder.CreateInsertElement(result, lane, builder.getInt32(i))
                                   : lane;
        }
        value = result;
    }

    void visit(const Ramp *op) override {
        llvm::Value *base = codegen(op->base), *stride = codegen(op->stride);
        const Type &et = op->base.type();
        if (!et.is_scalar()) {
            unsupported("a ramp of vectors");
        }
        llvm::Value *b = builder.CreateVectorSplat(op->lanes, base);
        llvm::Value *s = builder.CreateVectorSplat(op->lanes, stride);
        std::vector<llvm::Constant *> steps;
        for (int i = 0; i < op->lanes; i++) {
            steps.push_back(et.is_float() ? llvm::ConstantFP::get(scalar_type(et), double(i))
                                          : llvm::ConstantInt::get(scalar_type(et), i));
        }
        llvm::Value *k = llvm::ConstantVector::get(steps);
        value = et.is_float() ? builder.CreateFAdd(b, builder.CreateFMul(s, k))
                              : builder.CreateAdd(b, builder.CreateMul(s, k));
    }
    void visit(const Broadcast *op) override {
        if (!op->value.type().is_scalar()) {
            unsupported("a broadcast of a vector");
        }
        value = builder.CreateVectorSplat(op->lanes, codegen(op->value));
    }
    void visit(const Let *op) override {
        llvm::Value *v = codegen(op->value);
        push_var(op->name, v);
        value = codegen(op->body);
        pop_var(op->name);
    }
    void visit(const Shuffle *op) override {
        std::vector<llvm::Value *> vs;
        for (const Expr &v : op->vectors) {
            llvm::Value *x = codegen(v);
            if (!x->getType()->isVectorTy()) {
                x = builder.CreateVectorSplat(1, x);
            }
            vs.push_back(x);
        }
        // Concatenate everything into one vector, then pick the lanes.
        llvm::Value *all = vs[0];
        for (size_t i = 1; i < vs.size(); i++) {
            int na = llvm::cast<llvm::FixedVectorType>(all->getType())->getNumElements();
            int nb = llvm::cast<llvm::FixedVectorType>(vs[i]->getType())->getNumElements();
            int n = std::max(na, nb);
            auto widen = [&](llvm::Value *x, int from) {
                if (from == n) {
                    return x;
                }
                std::vector<int> mask;
                for (int j = 0; j < n; j++) {
                    mask.push_back(j < from ? j : -1);
                }
                return builder.CreateShuffleVector(x, mask);
            };
            llvm::Value *a = widen(all, na), *b = widen(vs[i], nb);
            std::vector<int> mask;
            for (int j = 0; j < na; j++) {
                mask.push_back(j);
            }
            for (int j = 0; j < nb; j++) {
                mask.push_back(n + j);
            }
            all = builder.CreateShuffleVector(a, b, mask);
        }
        if (op->type.is_scalar()) {
            value = builder.CreateExtractElement(all, builder.getInt32(op->indices[0]));
        } else {
            value = builder.CreateShuffleVector(all, op->indices);
        }
    }

    // --- calls ----------------------------------------------------------------------------

    /** A libdevice function `__nv_<name>` taking and returning `t` (scalar float). */
    llvm::Value *call_libdevice(const std::string &name, llvm::Type *t,
                                const std::vector<llvm::Value *> &args) {
        std::vector<llvm::Type *> params(args.size(), t);
        llvm::FunctionCallee f =
            mod.getOrInsertFunction(name, llvm::FunctionType::get(t, params, false));
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
        std::string n = op->name;
        for (const char *suffix : {"_f16", "_f32", "_f64"}) {
            if (n.size() > 4 && n.compare(n.size() - 4, 4, suffix) == 0) {
                n = n.substr(0, n.size() - 4);
            }
        }
        if (n.size() > 1 && n.back() == 'f' && fns.count(n.substr(0, n.size() - 1))) {
            n.pop_back();  // libm's float spelling: sqrtf
        }
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
        const std::string &n = op->name;
        auto arg = [&](int i) { return codegen(op->args[i]); };
        if (n == "likely" || n == "likely_if_innermost" || n == "promise_clamped" ||
            n == "unsafe_promise_clamped" || n == "strict_float") {
            value = arg(0);
        } else if (n == "gpu_thread_barrier") {
            builder.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
            value = llvm::Constant::getNullValue(llvm_type(op->type));
            return;
        } else if (n == "return_second") {
            arg(0);
            value = arg(1);
        } else if (n == "abs") {
            llvm::Value *a = arg(0);
            const Type &t = op->args[0].type();
            if (t.is_float()) {
                value = builder.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
            } else if (t.is_int()) {
                llvm::Value *neg =
                    builder.CreateICmpSLT(a, llvm::Constant::getNullValue(a->getType()));
                value = builder.CreateSelect(neg, builder.CreateNeg(a), a);
            } else {
                value = a;
            }
        } else if (n == "absd") {
            llvm::Value *a = arg(0), *b = arg(1);
            const Type &t = op->args[0].type();
            if (t.is_float()) {
                value =
                    builder.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, builder.CreateFSub(a, b));
            } else {
                llvm::Value *lt = compare(IRNodeType::LT, t, a, b);
                value = builder.CreateSelect(lt, builder.CreateSub(b, a), builder.CreateSub(a, b));
            }
        } else if (n == "bitwise_and" || n == "bitwise_or" || n == "bitwise_xor") {
            llvm::Value *a = arg(0), *b = arg(1);
            value = n == "bitwise_and"  ? builder.CreateAnd(a, b)
                    : n == "bitwise_or" ? builder.CreateOr(a, b)
                                        : builder.CreateXor(a, b);
        } else if (n == "bitwise_not") {
            value = builder.CreateNot(arg(0));
        } else if (n == "shift_left" || n == "shift_right") {
            llvm::Value *a = arg(0), *b = arg(1);
            b = builder.CreateIntCast(b, a->getType(), false);
            value = n == "shift_left"             ? builder.CreateShl(a, b)
                    : op->args[0].type().is_int() ? builder.CreateAShr(a, b)
                                                  : builder.CreateLShr(a, b);
        } else if (n == "count_leading_zeros" || n == "count_trailing_zeros") {
            value = builder.CreateBinaryIntrinsic(
                n == "count_leading_zeros" ? llvm::Intrinsic::ctlz : llvm::Intrinsic::cttz, arg(0),
                builder.getFalse());
        } else if (n == "popcount") {
            value = builder.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, arg(0));
        } else if (n == "if_then_else") {
            llvm::Value *c = arg(0);
            llvm::Value *t = arg(1), *f = arg(2);
            value = builder.CreateSelect(c, t, f);
        } else if (n == "div_round_to_zero" || n == "mod_round_to_zero") {
            llvm::Value *a = arg(0), *b = arg(1);
            bool s = op->type.is_int();
            value = n == "div_round_to_zero"
                        ? (s ? builder.CreateSDiv(a, b) : builder.CreateUDiv(a, b))
                        : (s ? builder.CreateSRem(a, b) : builder.CreateURem(a, b));
        } else if (call_math(op)) {
            return;
        } else {
            unsupported(std::string(op->is_intrinsic() ? "the intrinsic '" : "the call to '") + n +
                        "'");
        }
        llvm::Type *want = llvm_type(op->type);
        if (value->getType() != want && value->getType()->isIntOrIntVectorTy() &&
            want->isIntOrIntVectorTy()) {
            value = builder.CreateIntCast(value, want, op->type.is_int());
        }
    }

    // --- statements -----------------------------------------------------------------------

    void codegen(const Stmt &s) {
        if (s.defined()) {
            s.accept(this);
        }
    }

    void visit(const AssertStmt *op) override {
        unsupported("the assert '" + to_string(Stmt(op)) + "'");
    }
    void visit(const LetStmt *op) override {
        llvm::Value *v = codegen(op->value);
        if (!v->hasName() && !llvm::isa<llvm::Constant>(v)) {
            v->setName(op->name);
        }
        push_var(op->name, v);
        codegen(op->body);
        pop_var(op->name);
    }
    void visit(const ProducerConsumer *op) override {
        codegen(op->body);
    }
    void visit(const Block *op) override {
        Stmt s = op;
        while (const Block *b = s.as<Block>()) {
            codegen(b->first);
            s = b->rest;
        }
        codegen(s);
    }
    void visit(const Evaluate *op) override {
        if (!is_const(op->value)) {
            codegen(op->value);
        }
    }
    void visit(const IfThenElse *op) override {
        llvm::Value *c = codegen(op->condition);
        llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(ctx, "then", fn);
        llvm::BasicBlock *else_bb = llvm::BasicBlock::Create(ctx, "else", fn);
        llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx, "after_if", fn);
        builder.CreateCondBr(c, then_bb, else_bb);
        builder.SetInsertPoint(then_bb);
        codegen(op->then_case);
        builder.CreateBr(after);
        builder.SetInsertPoint(else_bb);
        codegen(op->else_case);
        builder.CreateBr(after);
        builder.SetInsertPoint(after);
    }

    void visit(const Store *op) override {
        const Type &t = op->value.type();
        llvm::Value *v = codegen(op->value);
        if (t.is_bool()) {
            v = builder.CreateZExt(v, memory_type(t));
        }
        if (t.is_scalar() && !op->predicate.defined()) {
            builder.CreateStore(v, element_address(op->name, t, codegen(op->index)));
            return;
        }
        const Expr *dense = op->predicate.defined() ? nullptr : dense_base(op->index);
        if (dense) {
            llvm::Value *addr = element_address(op->name, t.element_of(), codegen(*dense));
            builder.CreateAlignedStore(v, addr, llvm::Align(t.element_of().bytes()));
            return;
        }
        llvm::Value *idx = codegen(op->index);
        llvm::Value *pred = op->predicate.defined() ? codegen(op->predicate) : nullptr;
        for (int i = 0; i < t.lanes(); i++) {
            auto lane_of = [&](llvm::Value *x) {
                return t.is_vector() ? builder.CreateExtractElement(x, builder.getInt32(i)) : x;
            };
            llvm::Value *lane = lane_of(v), *li = lane_of(idx);
            // Bools were widened to bytes above; store lanes as their memory type.
            Type et = t.element_of();
            auto store_lane = [&]() {
                builder.CreateStore(lane, element_address(op->name, et, li));
            };
            if (pred) {
                llvm::BasicBlock *done;
                when(lane_of(pred), store_lane, &done);
            } else {
                store_lane();
            }
        }
    }

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
                      (loops->has_thread_loops && thread_loop_depth == 0);
        llvm::Value *base;
        if (shared) {
            if (count * op->type.bytes() > 48 * 1024) {
                unsupported("the shared allocation of '" + op->name + "' (" +
                            std::to_string(count * op->type.bytes()) +
                            " bytes, more than the 48 KiB of static shared memory)");
            }
            auto *g = new llvm::GlobalVariable(mod, at, false, llvm::GlobalValue::InternalLinkage,
                                               llvm::UndefValue::get(at), op->name, nullptr,
                                               llvm::GlobalValue::NotThreadLocal, shared_as);
            g->setAlignment(llvm::Align(16));
            base = g;
        } else {
            if (count * op->type.bytes() > 64 * 1024) {
                unsupported("the allocation of '" + op->name + "' (" +
                            std::to_string(count * op->type.bytes()) + " bytes per thread)");
            }
            llvm::IRBuilder<> b(&fn->getEntryBlock(), fn->getEntryBlock().begin());
            llvm::AllocaInst *a = b.CreateAlloca(at, nullptr, op->name);
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
        llvm::Value *min = codegen(op->min), *extent = codegen(op->extent);
        llvm::Value *end = builder.CreateAdd(min, extent);
        llvm::BasicBlock *pre = builder.GetInsertBlock();
        llvm::BasicBlock *loop = llvm::BasicBlock::Create(ctx, op->name + "_loop", fn);
        llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx, op->name + "_end", fn);
        builder.CreateCondBr(builder.CreateICmpSLT(min, end), loop, after);
        builder.SetInsertPoint(loop);
        llvm::PHINode *i = builder.CreatePHI(min->getType(), 2, op->name);
        i->addIncoming(min, pre);
        push_var(op->name, i);
        codegen(op->body);
        pop_var(op->name);
        llvm::Value *next = builder.CreateAdd(i, llvm::ConstantInt::get(min->getType(), 1));
        i->addIncoming(next, builder.GetInsertBlock());
        builder.CreateCondBr(builder.CreateICmpSLT(next, end), loop, after);
        builder.SetInsertPoint(after);
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
        int dim = loops->dims.at(op);
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
        if (loops->needs_guard(op)) {
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

std::string compile_to_ptx(const Module &lowered) {
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
