// Host code generation with LLVM 19: CodeGen_LLVM (CodeGen_LLVM.h: expressions, loads and
// stores, scopes, serial loops) plus what only the host has.
//
// One LLVM function per LoweredFunc, `i32 name(args...)` with buffers as `halide_buffer_t *` and
// scalars by value, returning 0 or a negative error code. The memory a Load/Store name refers to
// is an enclosing Allocate, a handle variable of that name, or a buffer argument's host pointer,
// in that order.
//
// Exits: every function has one exit block with a phi of the return code. An assert that fails
// evaluates its message (which reports the error) and branches there. Destructors (Halide's
// register_destructor, and heap allocations) are recorded in entry-block slots with a flag, so
// the exit block runs exactly those that were registered and not yet released, on every path.
//
// Parallel loops are outlined into closures `i32 task(void *uc, i32 index, i8 *closure)` run by
// the runtime's halide_do_par_for; the closure is a struct of every value the body uses.
//
// Calls: Halide's math functions become LLVM intrinsics, Halide's own polynomials (HalideMath.h)
// or libm calls; other extern calls are calls to the runtime (typed by their ir/RuntimeCalls.h
// signature, with user_context added) or to C functions; the host-only intrinsics (make_struct,
// alloca, register_destructor, stringify, the kernel table, ...) are lowered here, the pure ones by
// CodeGen_LLVM.
//
// The target machine (HostMachine.h) gives the triple, data layout, CPU and features, which
// every function carries as attributes. Floating point has Halide 14's fast-math flags unless
// the target has strict_float (strict_float() calls turn them off for what they wrap).
//
// Kernels for devices are compiled before this runs (DeviceKernels.h) and handed in as blobs,
// embedded in the module's tally_kernel_table.

#include "codegen/CodeGen_Host.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/Analysis.h"
#include "codegen/CodeGen_LLVM.h"
#include "codegen/HalideMath.h"
#include "ir/CPlusPlusMangle.h"
#include "ir/RuntimeCalls.h"
#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"
#include "tally_runtime.h"

namespace tally {

namespace {

static_assert(sizeof(halide_buffer_t) == 56 && offsetof(halide_buffer_t, host) == 16 &&
                  offsetof(halide_buffer_t, flags) == 24 && offsetof(halide_buffer_t, type) == 32 &&
                  offsetof(halide_buffer_t, dimensions) == 36 &&
                  offsetof(halide_buffer_t, dim) == 40 && sizeof(halide_dimension_t) == 16,
              "halide_buffer_t layout");
constexpr int buffer_host_field = 2;  // index of `host` in halide_buffer_t

class CodeGen final : public CodeGen_LLVM {
public:
    CodeGen(const Module &m, llvm::LLVMContext &ctx, llvm::TargetMachine &tm,
            const std::vector<CompiledKernel> &kernels)
        : CodeGen_LLVM(ctx), m(m), kernels(kernels) {
        owned_module = std::make_unique<llvm::Module>(m.name.empty() ? "tally" : m.name, ctx);
        mod = owned_module.get();
        mod->setDataLayout(tm.createDataLayout());
        mod->setTargetTriple(tm.getTargetTriple().str());
        target_cpu = tm.getTargetCPU().str();
        target_features = tm.getTargetFeatureString().str();
        has_prefetchw = tm.getMCSubtargetInfo()->checkFeatures("+prfchw");
        has_avx = tm.getMCSubtargetInfo()->checkFeatures("+avx");
        set_fast_math(!m.target.has_feature(Target::StrictFloat));
        float_le_ge_unordered = true;  // the host is x86
        buffer_t = llvm::StructType::create(ctx, {i64, ptr, ptr, i64, i32, i32, ptr, ptr},
                                            "struct.halide_buffer_t");
    }

    std::unique_ptr<llvm::Module> run() {
        emit_kernel_table();
        emit_buffer_constants();
        // Declare every function first: closures and pipelines refer to each other.
        for (const LoweredFunc &f : m.functions) {
            declare_function(f);
        }
        for (const LoweredFunc &f : m.functions) {
            define_function(f);
        }
        for (const LoweredFunc *f : pipeline_functions(m)) {
            define_argv_wrapper(*f);
            if (f->linkage == LinkageType::ExternalPlusMetadata) {
                define_metadata_getter(*f);
            }
        }
        // Every function says what it may use, so that the IR (and any tool reading it) agrees
        // with the target machine.
        for (llvm::Function &f : *mod) {
            if (!f.isDeclaration()) {
                f.addFnAttr("target-cpu", target_cpu);
                f.addFnAttr("target-features", target_features);
            }
        }
        std::string err;
        llvm::raw_string_ostream os(err);
        internal_assert(!llvm::verifyModule(*mod, &os)) << "invalid LLVM IR generated: " << err;
        return std::move(owned_module);
    }

    using CodeGen_LLVM::visit;

private:
    const Module &m;
    const std::vector<CompiledKernel> &kernels;
    std::unique_ptr<llvm::Module> owned_module;
    llvm::StructType *buffer_t;
    std::string target_cpu, target_features;  // of the target machine
    bool has_prefetchw = false;               // the target machine has PREFETCHW (prfchw)
    bool has_avx = false;                     // the target machine has AVX (256-bit RCPPS)
    /** `<name>.buffer` of each buffer constant with contents: its halide_buffer_t. */
    std::map<std::string, llvm::GlobalVariable *> buffer_constants;
    /** Each function of the module by its name in the IR (its symbol may differ: entry_symbols). */
    std::map<std::string, llvm::Function *> functions;

    struct Destructor {
        std::string function;
        llvm::AllocaInst *slot, *flag;
    };
    /** What a function being emitted has besides its scopes (which CodeGen_LLVM holds). */
    struct FnState {
        llvm::BasicBlock *exit = nullptr;
        llvm::PHINode *ret = nullptr;
        llvm::Value *user_context = nullptr;
        std::vector<Destructor> destructors;
        std::map<std::string, llvm::Value *> arg_buffers;  // name -> halide_buffer_t *
        // name -> its host pointer, loaded once after the argument checks: stores through the
        // data may alias the descriptor, so reloading it at every access would stay in loops.
        std::map<std::string, llvm::Value *> arg_hosts;
        std::map<std::string, std::vector<size_t>> heap;  // allocation -> destructor index
        // An async task's task_parent argument, passed on by the halide_do_parallel_tasks calls
        // it makes; null elsewhere (a pipeline, a par_for task).
        llvm::Value *task_parent = nullptr;
    };
    FnState *fs = nullptr;

    /** The module's tally_kernel_table (runtime/include/tally_runtime.h), when it has kernels. */
    /** The buffer constants given contents (BufferConstant::has_contents): each a private
     * halide_buffer_t over its elements (128-byte aligned) and its dimensions, bound to
     * `<name>.buffer` as Halide's object file binds an embedded Buffer. */
    void emit_buffer_constants() {
        llvm::StructType *dim_t = llvm::StructType::get(ctx, {i32, i32, i32, i32});
        for (BufferConstant b : m.buffers) {
            // What Halide's object file holds for the constants its GPU host code makes, which
            // the text does not say: the data printed between the braces (the kernels' source,
            // `<api>_gpu_source_kernels`) is a uint8 buffer of it, and a GPU module's state
            // (`<api>_buf`) is one null pointer, writable.
            if (!b.has_contents() && !b.opaque) {
                b.bytes = b.printed_data();
                b.type = UInt(8);
                b.mins = {0};
                b.extents = {int32_t(b.bytes.size())};
            } else if (b.opaque && gpu_module_state_api(b.name) != DeviceAPI::None) {
                b.type = UInt(64);
                b.bytes.assign(8, '\0');
            }
            if (!b.has_contents()) {
                continue;
            }
            llvm::Constant *bytes = llvm::ConstantDataArray::getRaw(b.bytes, b.bytes.size(), i8);
            // As Halide embeds a Buffer: the data read-only unless the buffer is a scalar (0-D),
            // its flags host_dirty.
            auto *data = new llvm::GlobalVariable(*mod, bytes->getType(), !b.extents.empty(),
                                                  llvm::GlobalValue::PrivateLinkage, bytes,
                                                  b.name + ".data");
            data->setAlignment(llvm::Align(128));
            std::vector<llvm::Constant *> dims;
            int32_t stride = 1;
            for (size_t d = 0; d < b.extents.size(); d++) {
                dims.push_back(llvm::ConstantStruct::get(
                    dim_t, {llvm::ConstantInt::get(i32, b.mins[d]),
                            llvm::ConstantInt::get(i32, b.extents[d]),
                            llvm::ConstantInt::get(i32, stride), llvm::ConstantInt::get(i32, 0)}));
                stride *= b.extents[d];
            }
            llvm::Constant *dim = llvm::ConstantPointerNull::get(builder.getPtrTy());
            if (!dims.empty()) {
                auto *arr_t = llvm::ArrayType::get(dim_t, dims.size());
                dim = new llvm::GlobalVariable(
                    *mod, arr_t, false, llvm::GlobalValue::PrivateLinkage,
                    llvm::ConstantArray::get(arr_t, dims), b.name + ".dim");
            }
            // halide_buffer_t: device, device_interface, host, flags, type (code, bits, lanes),
            // dimensions, dim, padding.
            uint32_t type = uint32_t(b.type.code()) | uint32_t(b.type.bits()) << 8 | 1u << 16;
            llvm::Constant *fields[] = {llvm::ConstantInt::get(i64, 0),
                                        llvm::ConstantPointerNull::get(builder.getPtrTy()),
                                        data,
                                        llvm::ConstantInt::get(i64, halide_buffer_flag_host_dirty),
                                        llvm::ConstantInt::get(i32, type),
                                        llvm::ConstantInt::get(i32, int32_t(b.extents.size())),
                                        dim,
                                        llvm::ConstantPointerNull::get(builder.getPtrTy())};
            buffer_constants[b.name + ".buffer"] = new llvm::GlobalVariable(
                *mod, buffer_t, false, llvm::GlobalValue::PrivateLinkage,
                llvm::ConstantStruct::get(buffer_t, fields), b.name + ".buffer");
        }
    }

    void emit_kernel_table() {
        if (kernels.empty()) {
            return;
        }
        llvm::StructType *src_t = llvm::StructType::get(ctx, {ptr, ptr, i64, i32, i32, i32, i32});
        std::vector<llvm::Constant *> entries;
        for (const CompiledKernel &k : kernels) {
            std::string code = k.code;
            if (k.device_api == DeviceAPI::CUDA || k.device_api == DeviceAPI::OpenCL) {
                code.push_back('\0');  // text: the runtime reads it as a C string
            }
            llvm::Constant *bytes = llvm::ConstantDataArray::getRaw(code, code.size(), i8);
            auto *code_g = new llvm::GlobalVariable(*mod, bytes->getType(), true,
                                                    llvm::GlobalValue::PrivateLinkage, bytes,
                                                    "kernel_code." + k.name);
            code_g->setAlignment(llvm::Align(8));
            llvm::Constant *name = builder.CreateGlobalStringPtr(k.name, "kernel_name", 0, mod);
            int api = runtime_device_api(k.device_api);
            entries.push_back(llvm::ConstantStruct::get(
                src_t,
                {name, code_g, llvm::ConstantInt::get(i64, k.code.size()),
                 llvm::ConstantInt::get(i32, api), llvm::ConstantInt::get(i32, k.num_args),
                 llvm::ConstantInt::get(i32, k.num_buffers), llvm::ConstantInt::get(i32, 0)}));
        }
        llvm::ArrayType *arr_t = llvm::ArrayType::get(src_t, entries.size());
        auto *arr =
            new llvm::GlobalVariable(*mod, arr_t, true, llvm::GlobalValue::PrivateLinkage,
                                     llvm::ConstantArray::get(arr_t, entries), "tally_kernels");
        llvm::StructType *table_t =
            llvm::StructType::get(ctx, {i32, i32, ptr, llvm::ArrayType::get(ptr, 4)});
        static_assert(sizeof(tally_kernel_table) == 48, "tally_kernel_table layout");
        new llvm::GlobalVariable(
            *mod, table_t, false, llvm::GlobalValue::InternalLinkage,
            llvm::ConstantStruct::get(
                table_t, {llvm::ConstantInt::get(i32, TALLY_RUNTIME_ABI_VERSION),
                          llvm::ConstantInt::get(i32, kernels.size()), arr,
                          llvm::ConstantAggregateZero::get(llvm::ArrayType::get(ptr, 4))}),
            kernel_table_intrinsic);
    }

    // --- names not in scope -------------------------------------------------------------------

    [[noreturn]] void unsupported(const std::string &what) override {
        user_error << "codegen: " << what << " cannot be compiled for the host";
        std::abort();  // not reached: user_error throws
    }
    /** A function of the module (`::name`, as closures are passed), or the user context. */
    llvm::Value *unbound_var(const std::string &n) override {
        if (n.compare(0, 2, "::") == 0) {
            auto f = functions.find(n.substr(2));
            if (f != functions.end()) {
                return f->second;
            }
        }
        if (n == "__user_context") {
            return fs->user_context;
        }
        auto bc = buffer_constants.find(n);
        if (bc != buffer_constants.end()) {
            return bc->second;
        }
        for (const BufferConstant &b : m.buffers) {
            if (b.opaque && (n == b.name || n == b.name + ".buffer")) {
                user_error << "codegen: '" << n << "' is the buffer constant '" << b.name
                           << "', printed `buffer " << b.name << " = {...}`: Halide keeps its "
                           << "contents in its object file, not in the lowered text; give them "
                           << "(tally-run and tallyc: --buffer-constant " << b.name
                           << "=FILE.npy[@MINS]; the library: Module::define_buffer_constant)";
            }
        }
        user_error << "codegen: variable '" << n << "' is not bound";
        return nullptr;
    }
    /** A buffer argument's host pointer. */
    llvm::Value *unbound_buffer(const std::string &n) override {
        auto a = fs->arg_hosts.find(n);
        if (a != fs->arg_hosts.end()) {
            return a->second;
        }
        user_error << "codegen: '" << n << "' names no buffer in scope";
        return nullptr;
    }

    void visit(const StringImm *op) override {
        value = builder.CreateGlobalStringPtr(op->value, "str", 0, mod);
    }

    // --- calls ----------------------------------------------------------------------------

    llvm::FunctionCallee declare_extern(const std::string &name, llvm::Type *ret,
                                        const std::vector<llvm::Type *> &params) {
        llvm::FunctionType *ft = llvm::FunctionType::get(ret, params, false);
        if (llvm::Function *f = mod->getFunction(name)) {
            return llvm::FunctionCallee(f->getFunctionType(), f);
        }
        llvm::Function *f = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, name, mod);
        for (unsigned i = 0; i < params.size(); i++) {
            if (params[i] == i1) {
                f->addParamAttr(i, llvm::Attribute::ZExt);
            }
        }
        if (ret == i1) {
            f->addRetAttr(llvm::Attribute::ZExt);
        }
        return llvm::FunctionCallee(ft, f);
    }

    llvm::Type *signature_type(char c) {
        switch (c) {
        case 'v':
            return builder.getVoidTy();
        case 'b':
            return i1;
        case 'i':
        case 'u':
            return i32;
        case 'l':
        case 'q':
            return i64;
        case 'f':
            return builder.getFloatTy();
        case 'd':
            return builder.getDoubleTy();
        default:
            return ptr;
        }
    }

    /** Calls an extern function: runtime symbols by their signature (adding user_context),
     * through the entry point the call's argument count selects where Halide's name has two
     * (resolve_runtime_call: Halide 21's 3-argument halide_profiler_set_current_func calls
     * tally_halide21_profiler_set_current_func), Halide's error helpers with user_context,
     * anything else as the IR types say. A vector
     * call (Halide's `(int32x4)halide_print(...)`, printing in vectorized code) is, as in
     * Halide 14, its arguments computed as vectors and then one scalar call per lane, in lane
     * order (only the lane being evaluated inside a lane-by-lane if_then_else or require). */
    llvm::Value *call_extern(const Call *op) {
        const RuntimeSymbol *sym = resolve_runtime_call(op->name, op->args.size());
        bool takes_uc = sym ? std::strchr(sym->signature, 'U') != nullptr
                            : op->name.compare(0, 13, "halide_error_") == 0;
        std::vector<llvm::Value *> values;
        int lanes = op->type.lanes();
        for (const Expr &a : op->args) {
            values.push_back(codegen(a));
            lanes = std::max(lanes, a.type().lanes());
        }
        llvm::Type *want = llvm_type(op->type.element_of());
        // A C++ function (Halide's NameMangling::CPlusPlus: its text prints the qualified name,
        // `ns::f(...)`; an unqualified one is written `f@extern_cplusplus(...)`) is called by
        // its Itanium-mangled symbol, from the IR types of its arguments.
        std::string symbol = sym ? sym->name : op->name;
        if (!sym &&
            (op->call_type == Call::ExternCPlusPlus || op->name.find("::") != std::string::npos)) {
            std::vector<Type> types;
            for (const Expr &a : op->args) {
                types.push_back(a.type().element_of());
            }
            symbol = itanium_mangled_name(op->name, types);
        }
        auto call = [&](const std::vector<llvm::Value *> &scalars) {
            std::vector<llvm::Value *> args;
            std::vector<llvm::Type *> params;
            if (takes_uc) {
                args.push_back(fs->user_context);
                params.push_back(ptr);
            }
            for (size_t i = 0; i < scalars.size(); i++) {
                llvm::Value *a = scalars[i];
                if (sym) {
                    const char *p = std::strchr(sym->signature, ':') + 1 + (takes_uc ? 1 : 0);
                    if (i < std::strlen(p)) {
                        a = convert_arg(a, signature_type(p[i]), op->args[i].type().is_int());
                    }
                }
                args.push_back(a);
                params.push_back(a->getType());
            }
            llvm::Type *ret = sym ? signature_type(sym->signature[0]) : want;
            llvm::Value *r = builder.CreateCall(declare_extern(symbol, ret, params), args);
            return ret->isVoidTy() ? llvm::Constant::getNullValue(want)
                                   : convert_arg(r, want, false);
        };
        if (lanes == 1) {
            return call(values);
        }
        llvm::Value *result = llvm::Constant::getNullValue(llvm_type(op->type));
        for (int i : effect_lanes(lanes)) {
            std::vector<llvm::Value *> scalars;
            for (llvm::Value *v : values) {
                scalars.push_back(lane_of(v, i));
            }
            llvm::Value *r = call(scalars);
            if (op->type.is_vector()) {
                result = builder.CreateInsertElement(result, r, uint64_t(i));
            }
        }
        return result;
    }

    /** `v` as a value of type `want` where the two differ: integer <-> pointer, or an integer
     * resized (sign-extended when `is_signed`). Other mismatches are left to LLVM's verifier. */
    llvm::Value *convert_arg(llvm::Value *v, llvm::Type *want, bool is_signed) {
        if (want == v->getType()) {
            return v;
        }
        if (want->isPointerTy() || v->getType()->isPointerTy()) {
            return want->isPointerTy() ? builder.CreateIntToPtr(v, want)
                                       : builder.CreatePtrToInt(v, want);
        }
        if (want->isIntegerTy() && v->getType()->isIntegerTy()) {
            return builder.CreateIntCast(v, want, is_signed);
        }
        return v;
    }

    /** Halide's math functions (sqrt_f32, atan2_f64, is_nan_f32, ...), as Halide 14's x86
     * back end computes them: rounding, sqrt and fabs are LLVM intrinsics (instructions);
     * `exp_f32`, `log_f32` and `pow_f32` are Halide's own polynomials (HalideMath.h), scalar and
     * vector alike; the other transcendental functions (and libm's spellings, `expf`) are libm's
     * (sinf for float32, sin for float64), called per lane for vectors; float16 computes in
     * float32. Classification ignores the fast-math flags, which would let LLVM assume the
     * answer. Returns false for any other extern call. */
    bool call_math(const Call *op) {
        static const std::map<std::string, llvm::Intrinsic::ID> intrinsics = {
            {"sqrt", llvm::Intrinsic::sqrt},   {"floor", llvm::Intrinsic::floor},
            {"ceil", llvm::Intrinsic::ceil},   {"round", llvm::Intrinsic::roundeven},
            {"trunc", llvm::Intrinsic::trunc}, {"fabs", llvm::Intrinsic::fabs},
            {"abs", llvm::Intrinsic::fabs},
        };
        static const std::set<std::string> unary_libm = {"sin",   "cos",   "tan",  "asin", "acos",
                                                         "atan",  "sinh",  "cosh", "tanh", "asinh",
                                                         "acosh", "atanh", "exp",  "log"};
        static const std::set<std::string> binary_libm = {"atan2", "pow", "hypot", "fmod"};
        std::string n = math_base_name(op->name, [&](const std::string &base) {
            return (intrinsics.count(base) || unary_libm.count(base) || binary_libm.count(base)) &&
                   op->type.is_float() && op->type.bits() == 32;
        });
        if (op->args.empty() || !op->args[0].type().is_float()) {
            return false;
        }
        if (n == "is_nan" || n == "is_inf" || n == "is_finite") {
            if (op->args.size() != 1) {
                return false;
            }
            llvm::IRBuilderBase::FastMathFlagGuard exact(builder);
            builder.clearFastMathFlags();
            llvm::Value *x = codegen(op->args[0]);
            llvm::Value *ax = builder.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
            llvm::Value *inf = llvm::ConstantFP::getInfinity(x->getType());
            value = n == "is_nan"   ? builder.CreateFCmpUNO(x, x)
                    : n == "is_inf" ? builder.CreateFCmpOEQ(ax, inf)
                                    : builder.CreateFCmpOLT(ax, inf);
            return true;
        }
        if ((n == "fast_inverse" || n == "fast_inverse_sqrt") && op->args.size() == 1 &&
            op->type.is_float() && op->type.bits() == 32) {
            value = fast_reciprocal(codegen(op->args[0]), n == "fast_inverse_sqrt");
            return true;
        }
        size_t arity = intrinsics.count(n) || unary_libm.count(n) ? 1
                       : binary_libm.count(n)                     ? 2
                                                                  : 0;
        if (!op->type.is_float() || arity == 0 || op->args.size() != arity) {
            return false;
        }
        // float16 computes in float32, as Halide does.
        const bool half = op->type.bits() == 16;
        std::vector<llvm::Value *> args;
        for (const Expr &a : op->args) {
            llvm::Value *v = codegen(a);
            if (half) {
                v = builder.CreateFPExt(v, llvm_type(Float(32, a.type().lanes())));
            }
            args.push_back(v);
        }
        // Halide expands only its own spellings (exp_f32, and exp_f16 through float32).
        const bool halide_spelling = op->name == n + "_f32" || op->name == n + "_f16";
        auto it = intrinsics.find(n);
        if (it != intrinsics.end()) {
            value = builder.CreateUnaryIntrinsic(it->second, args[0]);
        } else if (halide_spelling && n == "exp") {
            value = emit_halide_exp_f32(builder, args[0]);
        } else if (halide_spelling && n == "log") {
            value = emit_halide_log_f32(builder, args[0]);
        } else if (halide_spelling && n == "pow") {
            value = emit_halide_pow_f32(builder, args[0], args[1]);
        } else {
            value = call_libm(n, args);
        }
        if (half) {
            value = builder.CreateFPTrunc(value, llvm_type(op->type));
        }
        return true;
    }

    /** Halide's fast_inverse_f32 / fast_inverse_sqrt_f32 (float32, scalar or vector), as its
     * x86 runtime defines them: the approximate RCPSS/RCPPS and RSQRTSS/RSQRTPS instructions
     * (relative error <= 1.5 * 2^-12, bits that vary between CPU models), 8 lanes at a time
     * where the target has AVX, 4 where not, a vector's remaining lanes padded; elsewhere the
     * exact 1 / x and 1 / sqrt(x), as Halide's generic runtime. */
    llvm::Value *fast_reciprocal(llvm::Value *x, bool sqrt) {
        if (!llvm::Triple(mod->getTargetTriple()).isX86()) {
            llvm::Value *d = sqrt ? builder.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x) : x;
            return builder.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), d);
        }
        auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
        const unsigned lanes = vt ? vt->getNumElements() : 1;
        const unsigned width = has_avx && lanes > 4 ? 8 : 4;
        const llvm::Intrinsic::ID id = width == 8 ? (sqrt ? llvm::Intrinsic::x86_avx_rsqrt_ps_256
                                                          : llvm::Intrinsic::x86_avx_rcp_ps_256)
                                                  : (sqrt ? llvm::Intrinsic::x86_sse_rsqrt_ps
                                                          : llvm::Intrinsic::x86_sse_rcp_ps);
        llvm::Type *chunk_t = llvm::FixedVectorType::get(builder.getFloatTy(), width);
        llvm::Function *fn = llvm::Intrinsic::getDeclaration(mod, id);
        llvm::Value *result = vt ? llvm::PoisonValue::get(vt) : nullptr;
        for (unsigned base = 0; base < lanes; base += width) {
            // Lanes past the end hold 1.0 (any finite value would do: their results are dropped).
            llvm::Value *chunk = llvm::ConstantFP::get(chunk_t, 1.0);
            for (unsigned i = 0; i < width && base + i < lanes; i++) {
                llvm::Value *lane = vt ? builder.CreateExtractElement(x, base + i) : x;
                chunk = builder.CreateInsertElement(chunk, lane, i);
            }
            llvm::Value *r = builder.CreateCall(fn, {chunk});
            if (!vt) {
                return builder.CreateExtractElement(r, uint64_t(0));
            }
            for (unsigned i = 0; i < width && base + i < lanes; i++) {
                result = builder.CreateInsertElement(result, builder.CreateExtractElement(r, i),
                                                     base + i);
            }
        }
        return result;
    }

    /** libm's `base` (float suffix `f` for float32) on each lane of `args`. */
    llvm::Value *call_libm(const std::string &base, const std::vector<llvm::Value *> &args) {
        llvm::Type *t = args[0]->getType();
        llvm::Type *elem = t->getScalarType();
        std::string name = base + (elem->isFloatTy() ? "f" : "");
        std::vector<llvm::Type *> params(args.size(), elem);
        llvm::FunctionCallee fn = declare_extern(name, elem, params);
        if (auto *f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
            f->setDoesNotAccessMemory();  // as Halide declares them: errno is not observed
            f->setDoesNotThrow();
        }
        auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(t);
        if (!vt) {
            return builder.CreateCall(fn, args);
        }
        llvm::Value *result = llvm::PoisonValue::get(t);
        for (unsigned lane = 0; lane < vt->getNumElements(); lane++) {
            std::vector<llvm::Value *> lane_args;
            for (llvm::Value *a : args) {
                lane_args.push_back(builder.CreateExtractElement(a, lane));
            }
            result = builder.CreateInsertElement(result, builder.CreateCall(fn, lane_args), lane);
        }
        return result;
    }

    /** Halide's buffer field accessors (`_halide_buffer_get_min(buf, d)`, `..._get_host`,
     * `..._is_bounds_query`, ...), which its back end inlines from its runtime: loads of the
     * halide_buffer_t fields, computed as runtime/src/core/buffer.c defines them, instead of a call
     * each in every pipeline's prologue. Returns false for any other call. */
    bool call_buffer_accessor(const Call *op) {
        // Fields of halide_buffer_t, in the order of buffer_t (laid out as asserted above).
        enum Field { Device = 0, Interface, Host, Flags, TypeField, Dimensions, Dim };
        static const std::set<std::string> per_dim = {
            "_halide_buffer_get_min", "_halide_buffer_get_max", "_halide_buffer_get_extent",
            "_halide_buffer_get_stride"};
        static const std::set<std::string> whole = {
            "_halide_buffer_get_dimensions", "_halide_buffer_get_host",
            "_halide_buffer_get_device",     "_halide_buffer_get_device_interface",
            "_halide_buffer_get_host_dirty", "_halide_buffer_get_device_dirty",
            "_halide_buffer_get_shape",      "_halide_buffer_is_bounds_query",
            "_halide_buffer_get_type"};
        const std::string &n = op->name;
        const size_t arity = per_dim.count(n) ? 2 : whole.count(n) ? 1 : 0;
        if (arity == 0 || op->args.size() != arity || !op->args[0].type().is_handle()) {
            return false;
        }
        llvm::Value *buf = codegen(op->args[0]);
        auto field = [&](int f, llvm::Type *t) {
            return builder.CreateLoad(t, builder.CreateStructGEP(buffer_t, buf, f));
        };
        llvm::Value *r;
        if (arity == 2) {
            llvm::StructType *dim_t = llvm::StructType::get(ctx, {i32, i32, i32, i32});
            llvm::Value *d = builder.CreateSExtOrTrunc(codegen(op->args[1]), i64);
            llvm::Value *dim = builder.CreateInBoundsGEP(dim_t, field(Dim, ptr), d);
            auto member = [&](int k) {
                return builder.CreateLoad(i32, builder.CreateStructGEP(dim_t, dim, k));
            };
            if (n == "_halide_buffer_get_min") {
                r = member(0);
            } else if (n == "_halide_buffer_get_extent") {
                r = member(1);
            } else if (n == "_halide_buffer_get_stride") {
                r = member(2);
            } else {  // max = min + extent - 1, in wrapping 32-bit arithmetic as in C
                r = builder.CreateSub(builder.CreateAdd(member(0), member(1)), builder.getInt32(1));
            }
        } else if (n == "_halide_buffer_get_dimensions") {
            r = field(Dimensions, i32);
        } else if (n == "_halide_buffer_get_host") {
            r = field(Host, ptr);
        } else if (n == "_halide_buffer_get_device") {
            r = field(Device, i64);
        } else if (n == "_halide_buffer_get_device_interface") {
            r = field(Interface, ptr);
        } else if (n == "_halide_buffer_get_shape") {
            r = field(Dim, ptr);
        } else if (n == "_halide_buffer_get_type") {
            r = field(TypeField, i32);  // code | bits << 8 | lanes << 16, little-endian
        } else if (n == "_halide_buffer_is_bounds_query") {
            r = builder.CreateAnd(builder.CreateIsNull(field(Host, ptr)),
                                  builder.CreateIsNull(field(Device, i64)));
        } else {
            uint64_t bit = n == "_halide_buffer_get_host_dirty" ? halide_buffer_flag_host_dirty
                                                                : halide_buffer_flag_device_dirty;
            r = builder.CreateIsNotNull(builder.CreateAnd(field(Flags, i64), bit));
        }
        llvm::Type *want = llvm_type(op->type);
        if (r->getType() != want) {
            if (want->isPointerTy() || r->getType()->isPointerTy()) {
                r = want->isPointerTy() ? builder.CreateIntToPtr(r, want)
                                        : builder.CreatePtrToInt(r, want);
            } else {
                r = builder.CreateZExtOrTrunc(r, want);
            }
        }
        value = r;
        return true;
    }

    void visit(const Call *op) override {
        if (op->is_extern()) {
            if (!call_math(op) && !call_buffer_accessor(op)) {
                value = call_extern(op);
            }
            return;
        }
        if (!call_pure_intrinsic(op) && !call_host_intrinsic(op)) {
            user_error << "codegen: unsupported intrinsic '" << op->name << "'";
        }
        coerce_to_call_type(op);
    }

    /** The intrinsics only the host has: structs and stack memory, destructors, the kernel
     * table, stringify. Returns false if `op` is none of them. */
    bool call_host_intrinsic(const Call *op) {
        if (op->is_intrinsic(Call::make_struct)) {
            value = make_struct(op);
        } else if (op->is_intrinsic(Call::load_typed_struct_member)) {
            value = load_struct_member(op);
        } else if (op->is_intrinsic(Call::alloca)) {
            value = stack_alloca(op);
        } else if (op->is_intrinsic(Call::size_of_halide_buffer_t)) {
            value = llvm::ConstantInt::get(llvm_type(op->type), sizeof(halide_buffer_t));
        } else if (op->is_intrinsic(Call::register_destructor)) {
            const StringImm *fname = op->args[0].as<StringImm>();
            user_assert(fname) << "register_destructor needs the destructor's name";
            llvm::Value *obj = codegen(op->args[1]);
            register_destructor(fname->value, obj);
            value = llvm::ConstantPointerNull::get(builder.getPtrTy());
        } else if (op->is_intrinsic(Call::tally_kernel_table)) {
            llvm::GlobalVariable *g = mod->getGlobalVariable(kernel_table_intrinsic, true);
            value = g ? static_cast<llvm::Value *>(g)
                      : llvm::ConstantPointerNull::get(builder.getPtrTy());
        } else if (op->is_intrinsic(Call::stringify)) {
            value = stringify(op);
        } else if (op->is_intrinsic(Call::get_user_context)) {
            value = fs->user_context;
        } else if (op->is_intrinsic(Call::prefetch)) {
            value = prefetch(op);
        } else if (op->is_intrinsic(Call::require)) {
            value = require(op);
        } else if (op->is_intrinsic(Call::debug_to_file)) {
            // Halide's debug_to_file: Halide 14's (filename, type code, buffer) or Halide 21's
            // (filename, buffer), the runtime's entry point chosen by the argument count
            // (resolve_runtime_call throws, naming both forms, for any other count).
            const RuntimeSymbol *sym =
                resolve_runtime_call(runtime::halide_debug_to_file, op->args.size());
            std::vector<llvm::Value *> args = {fs->user_context};
            std::vector<llvm::Type *> params = {ptr};
            for (const Expr &a : op->args) {
                llvm::Value *v = codegen(a);
                if (args.size() == 2 && op->args.size() == 3) {
                    v = builder.CreateIntCast(v, i32, true);  // the type code
                } else if (args.size() > 1 && !v->getType()->isPointerTy()) {
                    v = builder.CreateIntToPtr(v, ptr);  // the buffer
                }
                args.push_back(v);
                params.push_back(v->getType());
            }
            value = builder.CreateCall(declare_extern(sym->name, i32, params), args);
        } else {
            return false;
        }
        return true;
    }

    /** Halide's prefetch(address, offset, extent, stride...) of elements of the call's type:
     * an llvm.prefetch of the first element, as Halide 14's runtime `_halide_prefetch` makes it
     * (`__builtin_prefetch(ptr, 1, 3)`: for writing, high locality, data cache). Halide 14
     * prefetches one cache line per call; it has no other effect. On x86 a prefetch for writing
     * is PREFETCHW where the target has it (prfchw). Where it does not, Halide 14's LLVM emitted
     * nothing (its code for x86-64-linux-sse41-avx-avx2, haswell, has no prefetch instruction)
     * while LLVM 19 would emit a PREFETCHT0, a read prefetch nobody asked for: Tally emits
     * nothing there either (prefetch_p at scale 8: 1.05 to 1.11x Halide's time with the
     * PREFETCHT0s, 0.87 to 0.89x without). */
    llvm::Value *prefetch(const Call *op) {
        user_assert(op->args.size() >= 2 && op->args[0].type().is_handle())
            << "prefetch needs an address and an offset";
        llvm::Value *base = codegen(op->args[0]);
        llvm::Value *offset = builder.CreateSExtOrTrunc(codegen(op->args[1]), i64);
        for (size_t i = 2; i < op->args.size(); i++) {
            codegen(op->args[i]);
        }
        int64_t bytes = std::max(1, op->type.element_of().bytes());
        llvm::Value *addr =
            builder.CreateGEP(i8, base, builder.CreateMul(offset, builder.getInt64(bytes)));
        bool x86 = llvm::Triple(mod->getTargetTriple()).isX86();
        if (x86 && !has_prefetchw) {
            return llvm::Constant::getNullValue(llvm_type(op->type));
        }
        llvm::Function *pf = llvm::Intrinsic::getDeclaration(mod, llvm::Intrinsic::prefetch, {ptr});
        builder.CreateCall(pf,
                           {addr, builder.getInt32(1), builder.getInt32(3), builder.getInt32(1)});
        return llvm::Constant::getNullValue(llvm_type(op->type));
    }

    /** Halide's require(condition, value, error): the pipeline fails with the error's code
     * unless the condition holds; else the value. With a vector condition, lane by lane as
     * Halide 14 scalarizes it: the first lane whose condition fails reports its own error. */
    llvm::Value *require(const Call *op) {
        user_assert(op->args.size() == 3) << "require takes a condition, a value and an error";
        llvm::Value *c = codegen(op->args[0]);
        const Expr err = op->args[2];
        if (!c->getType()->isVectorTy()) {
            fail_unless(c, [&]() { return codegen(err); });
            return codegen(op->args[1]);
        }
        int lanes = op->args[0].type().lanes();
        bool per_lane_value = op->type.is_vector() && !speculable(op->args[1]);
        llvm::Value *result = llvm::Constant::getNullValue(llvm_type(op->type));
        for (int i : effect_lanes(lanes)) {
            in_lane(i, [&] {
                fail_unless(lane_of(c, i), [&]() { return lane_of(codegen(err), i); });
                if (per_lane_value) {
                    result = builder.CreateInsertElement(result, lane_of(codegen(op->args[1]), i),
                                                         uint64_t(i));
                }
            });
        }
        return per_lane_value ? result : codegen(op->args[1]);
    }

    /** make_struct(args...): a stack struct of the values (null for none). */
    llvm::Value *make_struct(const Call *op) {
        if (op->args.empty()) {
            return llvm::ConstantPointerNull::get(builder.getPtrTy());
        }
        std::vector<llvm::Value *> vals;
        std::vector<llvm::Type *> types;
        for (const Expr &a : op->args) {
            vals.push_back(codegen(a));
            types.push_back(vals.back()->getType());
        }
        llvm::StructType *st = llvm::StructType::get(ctx, types);
        llvm::AllocaInst *s = entry_alloca(st, "struct");
        for (size_t i = 0; i < vals.size(); i++) {
            builder.CreateStore(vals[i], builder.CreateStructGEP(st, s, i));
        }
        return s;
    }

    /** load_typed_struct_member(p, prototype, i): field i of the make_struct `p` points to. */
    llvm::Value *load_struct_member(const Call *op) {
        llvm::Value *p = codegen(op->args[0]);
        llvm::Value *proto = codegen(op->args[1]);
        int64_t idx;
        user_assert(const_int_value(op->args[2], &idx))
            << "load_typed_struct_member needs a constant index";
        auto *a = llvm::dyn_cast<llvm::AllocaInst>(proto);
        user_assert(a && a->getAllocatedType()->isStructTy())
            << "load_typed_struct_member: the prototype must be a make_struct";
        auto *st = llvm::cast<llvm::StructType>(a->getAllocatedType());
        return builder.CreateLoad(st->getElementType(idx), builder.CreateStructGEP(st, p, idx));
    }

    /** alloca(bytes): stack memory of a constant size. */
    llvm::Value *stack_alloca(const Call *op) {
        int64_t bytes;
        const Call *size_call = op->args[0].as<Call>();
        if (size_call && size_call->is_intrinsic(Call::size_of_halide_buffer_t)) {
            bytes = sizeof(halide_buffer_t);  // Halide's `alloca(size_of_halide_buffer_t())`
        } else {
            user_assert(const_int_value(op->args[0], &bytes) && bytes >= 0 && bytes < (1 << 20))
                << "alloca needs a constant size";
        }
        return entry_alloca(llvm::ArrayType::get(i8, bytes), "alloca");
    }

    /** Halide's stringify: its arguments appended to a stack buffer (sized as Halide 14 sizes
     * it, stringify_size) by Halide's text primitives (runtime/src/core/to_string.c), as the
     * code of Halide 14 builds it: strings as they are, bools as `true`/`false`, integers in
     * decimal, float16 and float32 with 6 decimals, float64 in Halide's scientific form, buffers
     * as its runtime prints them, other pointers in hex. A vector stringify
     * (`(char *)x4stringify(...)`, printing in vectorized code) is one text per lane, each in a
     * buffer of its own, as Halide 14 scalarizes it. */
    llvm::Value *stringify(const Call *op) {
        std::vector<llvm::Value *> values;
        for (const Expr &a : op->args) {
            values.push_back(codegen(a));
        }
        if (op->type.is_scalar()) {
            return stringify_lane(op, values, -1);
        }
        llvm::Value *result = llvm::Constant::getNullValue(llvm_type(op->type));
        for (int i : effect_lanes(op->type.lanes())) {
            result =
                builder.CreateInsertElement(result, stringify_lane(op, values, i), uint64_t(i));
        }
        return result;
    }

    /** The bytes of a stringify's buffer, a bound on its text as Halide 14 sizes it: one for
     * the NUL, each string's length, 20 per integer or bool (INT64_MIN; Halide allows 19, one
     * short of it), 47 per float16 or float32 (`%f` of -FLT_MAX), 14 per float64 (scientific),
     * 18 per pointer, 512 per buffer (no strict bound: a longer description is cut, as Halide's
     * is); rounded up to 16, at most 8 KiB. A `char *` that is not a constant (Tally prints its
     * text; Halide 14 prints no such argument) gets 1 KiB. Not a fixed 1 KiB each: with a buffer
     * per lane of every vector print, print_vec's frame took 36 KiB (Halide's 4 KiB), stack
     * pages its first run faulted in (first run 1.19x Halide's). */
    static int stringify_size(const Call *op) {
        int size = 1;
        for (const Expr &a : op->args) {
            const Type t = a.type().element_of();
            const StringImm *s = a.as<StringImm>();
            if (const Broadcast *b = a.as<Broadcast>()) {
                s = b->value.as<StringImm>();
            }
            if (s) {
                size += int(std::min<size_t>(s->value.size(), 8 * 1024));
            } else if (t.is_handle_to("char")) {
                size += 1024;
            } else if (t.is_int() || t.is_uint()) {
                size += 20;
            } else if (t.is_float()) {
                size += t.bits() == 64 ? 14 : 47;
            } else if (t.is_handle_to("halide_buffer_t")) {
                size += 512;
            } else {
                size += 18;
            }
            size = std::min(size, 8 * 1024 + 1);
        }
        return std::min(8 * 1024, (size + 15) / 16 * 16);
    }

    /** The text of lane `lane` of stringify's argument values (all scalars for -1). */
    llvm::Value *stringify_lane(const Call *op, const std::vector<llvm::Value *> &values,
                                int lane) {
        const int size = stringify_size(op);
        llvm::Value *buf = entry_alloca(llvm::ArrayType::get(i8, size), "stringify");
        llvm::Value *end = builder.CreateConstInBoundsGEP1_64(i8, buf, size);
        builder.CreateStore(builder.getInt8(0), buf);  // the text of no arguments
        llvm::Value *dst = buf;
        auto append = [&](const char *fn, const char *arg_sig, std::vector<llvm::Value *> rest) {
            std::vector<llvm::Type *> params = {ptr, ptr};
            for (const char *c = arg_sig; *c; c++) {
                params.push_back(signature_type(*c));
            }
            std::vector<llvm::Value *> call_args = {dst, end};
            call_args.insert(call_args.end(), rest.begin(), rest.end());
            dst = builder.CreateCall(declare_extern(fn, ptr, params), call_args);
        };
        for (size_t k = 0; k < op->args.size(); k++) {
            const Expr &a = op->args[k];
            const Type t = a.type().element_of();
            llvm::Value *v = lane_of(values[k], lane);
            if (a.as<StringImm>() || (t.is_handle_to("char")) ||
                (a.as<Broadcast>() && a.as<Broadcast>()->value.as<StringImm>())) {
                append(runtime::halide_string_to_string, "s", {v});
            } else if (t.is_bool()) {
                append(runtime::halide_string_to_string, "s",
                       {builder.CreateSelect(v, builder.CreateGlobalStringPtr("true"),
                                             builder.CreateGlobalStringPtr("false"))});
            } else if (t.is_handle_to("halide_buffer_t")) {
                append(runtime::halide_buffer_to_string, "B", {v});
            } else if (t.is_handle()) {
                append(runtime::halide_pointer_to_string, "p", {v});
            } else if (t.is_float()) {
                append(runtime::halide_double_to_string, "di",
                       {builder.CreateFPExt(v, builder.getDoubleTy()),
                        builder.getInt32(t.bits() == 64 ? 1 : 0)});
            } else if (t.is_int()) {
                append(runtime::halide_int64_to_string, "li",
                       {builder.CreateSExtOrTrunc(v, i64), builder.getInt32(1)});
            } else {
                append(runtime::halide_uint64_to_string, "qi",
                       {builder.CreateZExtOrTrunc(v, i64), builder.getInt32(1)});
            }
        }
        return buf;
    }

    void register_destructor(const std::string &function, llvm::Value *obj) {
        Destructor d;
        d.function = function;
        d.slot = entry_alloca(ptr, function + ".obj");
        d.flag = entry_alloca(i1, function + ".live");
        {
            // Not live until this point is reached: cleared right after its alloca, which is
            // at the top of the entry block and so dominates every exit.
            llvm::IRBuilder<> b(ctx);
            if (llvm::Instruction *next = d.flag->getNextNode()) {
                b.SetInsertPoint(next);
            } else {
                b.SetInsertPoint(d.flag->getParent());
            }
            b.CreateStore(builder.getFalse(), d.flag);
        }
        if (!obj->getType()->isPointerTy()) {
            obj = builder.CreateIntToPtr(obj, ptr);
        }
        builder.CreateStore(obj, d.slot);
        builder.CreateStore(builder.getTrue(), d.flag);
        fs->destructors.push_back(d);
    }

    // --- statements -----------------------------------------------------------------------

    /** Branches to the exit with `code` when `ok` is false. */
    void fail_unless(llvm::Value *ok, const std::function<llvm::Value *()> &code) {
        llvm::BasicBlock *fail = llvm::BasicBlock::Create(ctx, "assert_failed", fn);
        llvm::BasicBlock *pass = llvm::BasicBlock::Create(ctx, "assert_ok", fn);
        builder.CreateCondBr(ok, pass, fail, llvm::MDBuilder(ctx).createBranchWeights(1 << 20, 1));
        builder.SetInsertPoint(fail);
        llvm::Value *c = code();
        c = builder.CreateIntCast(c, i32, true);
        // An assert whose message evaluates to 0 still fails.
        llvm::Value *is_zero = builder.CreateICmpEQ(c, builder.getInt32(0));
        c = builder.CreateSelect(is_zero, builder.getInt32(-1), c);
        fs->ret->addIncoming(c, builder.GetInsertBlock());
        builder.CreateBr(fs->exit);
        builder.SetInsertPoint(pass);
    }

    void visit(const AssertStmt *op) override {
        llvm::Value *ok = codegen(op->condition);
        const Expr msg = op->message;
        fail_unless(ok, [&]() { return codegen(msg); });
    }

    void visit(const Allocate *op) override {
        llvm::Type *et = memory_type(op->type);
        llvm::Value *base;
        bool heap = allocation_uses_heap(op);
        bool custom_free = false;
        if (op->new_expr.defined()) {
            base = codegen(op->new_expr);
            heap = false;
            // `custom_delete { f(name); }`: f(user_context, base) where the allocation is freed
            // (or the function exits early), as Halide calls it (memoize's cache release).
            if (!op->free_function.empty()) {
                register_destructor(op->free_function, base);
                fs->heap[op->name].push_back(fs->destructors.size() - 1);
                custom_free = true;
            }
        } else if (op->condition.defined() && is_const_zero(op->condition)) {
            base = llvm::ConstantPointerNull::get(builder.getPtrTy());
            heap = false;
        } else if (!heap) {
            int64_t bytes = constant_allocation_bytes(op);
            int64_t n = bytes < 0 ? 0 : bytes / std::max(1, op->type.bytes() * op->type.lanes());
            base = entry_alloca(llvm::ArrayType::get(et, std::max<int64_t>(n, 1)), op->name);
        } else {
            llvm::Value *count = builder.getInt64(op->type.lanes());
            for (const Expr &e : op->extents) {
                count = builder.CreateMul(count, builder.CreateSExtOrTrunc(codegen(e), i64));
            }
            llvm::Value *bytes = builder.CreateMul(count, builder.getInt64(op->type.bytes()));
            llvm::Value *cond = op->condition.defined() ? codegen(op->condition) : nullptr;
            llvm::FunctionCallee malloc_fn =
                declare_extern(runtime::halide_malloc, ptr, {ptr, i64});
            llvm::Value *p = builder.CreateCall(malloc_fn, {fs->user_context, bytes}, op->name);
            if (cond) {
                // A false condition means no allocation.
                p = builder.CreateSelect(cond, p,
                                         llvm::ConstantPointerNull::get(builder.getPtrTy()));
            }
            llvm::Value *ok =
                builder.CreateICmpNE(p, llvm::ConstantPointerNull::get(builder.getPtrTy()));
            if (cond) {
                ok = builder.CreateOr(ok, builder.CreateNot(cond));
            }
            fail_unless(ok, [&]() {
                return builder.CreateCall(declare_extern("halide_error_out_of_memory", i32, {ptr}),
                                          {fs->user_context});
            });
            register_destructor(runtime::halide_free, p);
            fs->heap[op->name].push_back(fs->destructors.size() - 1);
            base = p;
        }
        push_buffer(op->name, base);
        push_var(op->name, base);
        codegen(op->body);
        pop_var(op->name);
        pop_buffer(op->name);
        if (heap || custom_free) {
            auto it = fs->heap.find(op->name);
            size_t d = it->second.back();
            it->second.pop_back();
            if (it->second.empty()) {
                fs->heap.erase(it);
            }
            release_heap(d);
        }
    }

    /** Frees a heap allocation now if it is still live, and disarms its destructor. */
    void release_heap(size_t d) {
        const Destructor &dt = fs->destructors[d];
        llvm::Value *live = builder.CreateLoad(i1, dt.flag);
        llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "free", fn);
        llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "freed", fn);
        builder.CreateCondBr(live, yes, done);
        builder.SetInsertPoint(yes);
        builder.CreateCall(destructor_callee(dt.function),
                           {fs->user_context, builder.CreateLoad(ptr, dt.slot)});
        builder.CreateStore(builder.getFalse(), dt.flag);
        builder.CreateBr(done);
        builder.SetInsertPoint(done);
    }

    void visit(const Free *op) override {
        auto it = fs->heap.find(op->name);
        if (it != fs->heap.end()) {
            release_heap(it->second.back());
        }
    }

    void visit(const For *op) override {
        user_assert(!is_gpu_for_type(op->for_type))
            << "codegen: GPU loop '" << op->name
            << "' reached host code generation; run offload-gpu-loops first";
        if (op->for_type == ForType::Parallel) {
            llvm::Value *min = codegen(op->min), *extent = codegen(op->extent);
            parallel_loop(op, min, extent);
            return;
        }
        serial_loop(op);
    }

    /** What a statement outlined into a task function uses from the function it leaves: every
     * variable and buffer it names that is visible here, stored in a struct on this function's
     * stack (a task runs before the call that starts it returns). */
    struct Closure {
        std::vector<std::string> var_names, buf_names;
        std::vector<llvm::Type *> types;
        llvm::StructType *type = nullptr;
        llvm::Value *ptr = nullptr;
    };

    /** The closure of `bodies`, leaving out `bound` (what the task binds itself: a loop index). */
    Closure make_closure(const std::vector<Stmt> &bodies, const std::string &bound,
                         const std::string &label) {
        UsedNames used;
        for (const Stmt &b : bodies) {
            UsedNames u = used_names(b);
            used.vars.insert(u.vars.begin(), u.vars.end());
            used.loaded.insert(u.loaded.begin(), u.loaded.end());
            used.stored.insert(u.stored.begin(), u.stored.end());
        }
        std::set<std::string> used_buffers = used.loaded;
        used_buffers.insert(used.stored.begin(), used.stored.end());
        Closure c;
        std::vector<llvm::Value *> vals;
        for (const std::string &n : used.vars) {
            if (n == bound || n.compare(0, 2, "::") == 0 || !vars.count(n)) {
                continue;
            }
            c.var_names.push_back(n);
            vals.push_back(vars[n].back());
        }
        for (const std::string &n : used_buffers) {
            if (!buffers.count(n) && vars.count(n)) {
                // The memory is named by a handle variable: capture the variable.
                if (std::find(c.var_names.begin(), c.var_names.end(), n) == c.var_names.end()) {
                    c.var_names.push_back(n);
                    vals.insert(vals.begin() + (c.var_names.size() - 1), vars[n].back());
                }
                continue;
            }
            if (!buffers.count(n) && !fs->arg_hosts.count(n)) {
                continue;  // not visible here: the body must bind it itself
            }
            c.buf_names.push_back(n);
            vals.push_back(buffer_base(n));
        }
        for (llvm::Value *v : vals) {
            c.types.push_back(v->getType());
        }
        c.type = llvm::StructType::get(ctx, c.types);
        c.ptr = entry_alloca(c.type, label + ".closure");
        for (size_t i = 0; i < vals.size(); i++) {
            builder.CreateStore(vals[i], builder.CreateStructGEP(c.type, c.ptr, i));
        }
        return c;
    }

    /** Compiles `body` as the function `task`, a function of its own with empty scopes: the
     * closure (its argument `closure_arg`) binds what the body uses from outside, then `bind`
     * binds what the task's other arguments give. `task_parent` is what nested
     * halide_do_parallel_tasks calls in the body pass on (null: none). */
    void outline(llvm::Function *task, const Closure &c, unsigned closure_arg,
                 llvm::Value *task_parent, const Stmt &body, const std::function<void()> &bind) {
        llvm::IRBuilderBase::InsertPoint saved_ip = builder.saveIP();
        FnState *outer = fs;
        llvm::Function *outer_fn = fn;
        Scope outer_vars = std::exchange(vars, {}), outer_buffers = std::exchange(buffers, {});
        FnState inner;
        begin_function(task, &inner, task->getArg(0));
        inner.task_parent = task_parent;
        llvm::Value *cl = task->getArg(closure_arg);
        for (size_t i = 0; i < c.var_names.size(); i++) {
            llvm::Value *v = builder.CreateLoad(c.types[i], builder.CreateStructGEP(c.type, cl, i),
                                                c.var_names[i]);
            push_var(c.var_names[i], v);
        }
        for (size_t j = 0; j < c.buf_names.size(); j++) {
            size_t i = c.var_names.size() + j;
            llvm::Value *v = builder.CreateLoad(c.types[i], builder.CreateStructGEP(c.type, cl, i),
                                                c.buf_names[j]);
            push_buffer(c.buf_names[j], v);
        }
        bind();
        const bool outer_constant_trip = std::exchange(in_constant_trip_loop, false);
        codegen(body);
        in_constant_trip_loop = outer_constant_trip;
        end_function();
        fs = outer;
        fn = outer_fn;
        vars = std::move(outer_vars);
        buffers = std::move(outer_buffers);
        builder.restoreIP(saved_ip);
    }

    /** Outlines the body into a task and runs it with halide_do_par_for. */
    void parallel_loop(const For *op, llvm::Value *min, llvm::Value *extent) {
        Closure c = make_closure({op->body}, op->name, op->name);
        llvm::FunctionType *task_t = llvm::FunctionType::get(i32, {ptr, i32, ptr}, false);
        llvm::Function *task = llvm::Function::Create(task_t, llvm::Function::InternalLinkage,
                                                      fn->getName() + "_par_for_" + op->name, mod);
        outline(task, c, 2, nullptr, op->body, [&]() {
            llvm::Value *idx = task->getArg(1);
            if (idx->getType() != min->getType()) {
                idx = builder.CreateIntCast(idx, min->getType(), true);
            }
            push_var(op->name, idx);
        });
        llvm::FunctionCallee par_for =
            declare_extern(runtime::halide_do_par_for, i32, {ptr, ptr, i32, i32, ptr});
        llvm::Value *r = builder.CreateCall(
            par_for, {fs->user_context, task, builder.CreateIntCast(min, i32, true),
                      builder.CreateIntCast(extent, i32, true), c.ptr});
        fail_unless(builder.CreateICmpEQ(r, builder.getInt32(0)), [&]() { return r; });
    }

    // --- async tasks (fork and acquire) ----------------------------------------------------
    //
    // As Halide lowers them (LowerParallelTasks): the branches of a fork chain, nested forks in
    // a branch's place included, are the tasks of one halide_do_parallel_tasks call; the
    // acquires a task starts with become its semaphore list, which the runtime takes before it
    // runs the task, so no thread blocks waiting for them; an acquire anywhere else is a call
    // of its own with one task. Every task is called once (min 0, extent 1). Its min_threads
    // (async_min_threads) tells the runtime whether it may block inside, so that it gets a
    // thread of its own. The semaphores themselves are made by halide_semaphore_init and fed by
    // halide_semaphore_release calls already in the text.

    struct AsyncTask {
        Stmt body;                              // after its leading acquires
        std::vector<const Acquire *> acquires;  // its leading acquires, outermost first
    };

    static void collect_async_tasks(const Stmt &s, std::vector<AsyncTask> *tasks) {
        if (const Fork *f = s.as<Fork>()) {
            collect_async_tasks(f->first, tasks);
            collect_async_tasks(f->rest, tasks);
            return;
        }
        AsyncTask t;
        t.body = s;
        while (const Acquire *a = t.body.as<Acquire>()) {
            t.acquires.push_back(a);
            t.body = a->body;
        }
        tasks->push_back(std::move(t));
    }

    void visit(const Fork *op) override { run_async_tasks(Stmt(op), "fork"); }
    void visit(const Acquire *op) override { run_async_tasks(Stmt(op), "acquire"); }

    /** One halide_do_parallel_tasks call running the tasks of `s`, checked. */
    void run_async_tasks(const Stmt &s, const std::string &kind) {
        std::vector<AsyncTask> tasks;
        collect_async_tasks(s, &tasks);
        std::vector<Stmt> bodies;
        for (const AsyncTask &t : tasks) {
            bodies.push_back(t.body);
        }
        std::string label = fn->getName().str() + "." + kind;
        Closure c = make_closure(bodies, "", label);

        // halide_semaphore_acquire_t and halide_parallel_task_t (tally_runtime.h).
        llvm::StructType *acquire_t = llvm::StructType::get(ctx, {ptr, i32});
        llvm::StructType *task_t =
            llvm::StructType::get(ctx, {ptr, ptr, ptr, ptr, i32, i32, i32, i32, i8});
        llvm::Value *array = entry_alloca(llvm::ArrayType::get(task_t, tasks.size()), label);
        llvm::FunctionType *fn_t = llvm::FunctionType::get(i32, {ptr, i32, i32, ptr, ptr}, false);
        for (size_t i = 0; i < tasks.size(); i++) {
            const AsyncTask &t = tasks[i];
            std::string name = label + "." + std::to_string(i);
            llvm::Function *task = llvm::Function::Create(
                fn_t, llvm::Function::InternalLinkage,
                fn->getName() + "_" + kind + "_task_" + std::to_string(i), mod);
            outline(task, c, 3, task->getArg(4), t.body, []() {});
            llvm::Value *sems = llvm::ConstantPointerNull::get(builder.getPtrTy());
            if (!t.acquires.empty()) {
                sems = entry_alloca(llvm::ArrayType::get(acquire_t, t.acquires.size()),
                                    name + ".semaphores");
                for (size_t j = 0; j < t.acquires.size(); j++) {
                    llvm::Value *sem = codegen(t.acquires[j]->semaphore);
                    llvm::Value *count = codegen(t.acquires[j]->count);
                    llvm::Value *a = builder.CreateConstInBoundsGEP1_32(acquire_t, sems, j);
                    builder.CreateStore(sem, builder.CreateStructGEP(acquire_t, a, 0));
                    builder.CreateStore(count, builder.CreateStructGEP(acquire_t, a, 1));
                }
            }
            llvm::Value *slot = builder.CreateConstInBoundsGEP1_32(task_t, array, i);
            llvm::Value *fields[] = {
                task,
                c.ptr,
                builder.CreateGlobalStringPtr(name, "task_name", 0, mod),
                sems,
                builder.getInt32(int(t.acquires.size())),
                builder.getInt32(0),
                builder.getInt32(1),
                builder.getInt32(async_min_threads(t.body)),
                builder.getInt8(0),
            };
            for (unsigned k = 0; k < 9; k++) {
                builder.CreateStore(fields[k], builder.CreateStructGEP(task_t, slot, k));
            }
        }
        llvm::Value *parent =
            fs->task_parent ? fs->task_parent : llvm::ConstantPointerNull::get(builder.getPtrTy());
        llvm::FunctionCallee run =
            declare_extern(runtime::halide_do_parallel_tasks, i32, {ptr, i32, ptr, ptr});
        llvm::Value *r = builder.CreateCall(
            run, {fs->user_context, builder.getInt32(int(tasks.size())), array, parent});
        fail_unless(builder.CreateICmpEQ(r, builder.getInt32(0)), [&]() { return r; });
    }

    // --- functions ------------------------------------------------------------------------

    void declare_function(const LoweredFunc &f) {
        std::vector<llvm::Type *> params;
        for (const Argument &a : f.args) {
            params.push_back(a.is_buffer() ? ptr : llvm_type(a.type.is_valid() ? a.type : Int(32)));
        }
        llvm::FunctionType *ft = llvm::FunctionType::get(i32, params, false);
        llvm::Function *func = llvm::Function::Create(ft,
                                                      f.linkage == LinkageType::Internal
                                                          ? llvm::Function::InternalLinkage
                                                          : llvm::Function::ExternalLinkage,
                                                      entry_symbols(m, f).function, mod);
        functions[f.name] = func;
        for (size_t i = 0; i < f.args.size(); i++) {
            func->getArg(i)->setName(f.args[i].is_buffer() ? buffer_var_name(f.args[i].name)
                                                           : f.args[i].name);
        }
    }

    void begin_function(llvm::Function *func, FnState *state, llvm::Value *user_context) {
        fs = state;
        fn = func;
        llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx, "entry", fn);
        fs->exit = llvm::BasicBlock::Create(ctx, "exit", fn);
        builder.SetInsertPoint(fs->exit);
        fs->ret = builder.CreatePHI(i32, 4, "result");
        builder.SetInsertPoint(entry);
        fs->user_context =
            user_context ? user_context : llvm::ConstantPointerNull::get(builder.getPtrTy());
    }

    /** A destructor `function(user_context, object)`: typed by its runtime signature where it
     * has one, else as Halide's destructors are (an int32 result, ignored). */
    llvm::FunctionCallee destructor_callee(const std::string &function) {
        llvm::Type *ret = function == runtime::halide_free ? builder.getVoidTy() : i32;
        if (const RuntimeSymbol *sym = find_runtime_symbol(function.c_str())) {
            ret = signature_type(sym->signature[0]);
        }
        return declare_extern(function, ret, {ptr, ptr});
    }

    /** Closes the body (success: 0), then runs live destructors in reverse and returns. */
    void end_function() {
        fs->ret->addIncoming(builder.getInt32(0), builder.GetInsertBlock());
        builder.CreateBr(fs->exit);
        llvm::Instruction *first = fs->exit->getFirstNonPHI();
        if (first) {
            builder.SetInsertPoint(first);
        } else {
            builder.SetInsertPoint(fs->exit);
        }
        for (auto it = fs->destructors.rbegin(); it != fs->destructors.rend(); ++it) {
            llvm::Value *live = builder.CreateLoad(i1, it->flag);
            llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "destroy", fn);
            llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "destroyed", fn);
            builder.CreateCondBr(live, yes, done);
            builder.SetInsertPoint(yes);
            builder.CreateCall(destructor_callee(it->function),
                               {fs->user_context, builder.CreateLoad(ptr, it->slot)});
            builder.CreateBr(done);
            builder.SetInsertPoint(done);
        }
        builder.CreateRet(fs->ret);
    }

    void define_function(const LoweredFunc &f) {
        llvm::Function *func = functions.at(f.name);
        FnState state;
        llvm::Value *uc = nullptr;
        for (size_t i = 0; i < f.args.size(); i++) {
            if (f.args[i].name == "__user_context") {
                uc = func->getArg(i);
            }
        }
        begin_function(func, &state, uc);
        for (size_t i = 0; i < f.args.size(); i++) {
            const Argument &a = f.args[i];
            llvm::Value *v = func->getArg(i);
            if (a.is_buffer()) {
                push_var(buffer_var_name(a.name), v);
                state.arg_buffers[a.name] = v;
                // A null buffer is an error the caller can act on, not a crash.
                llvm::Value *ok =
                    builder.CreateICmpNE(v, llvm::ConstantPointerNull::get(builder.getPtrTy()));
                std::string name = a.name;
                fail_unless(ok, [&, name]() {
                    return builder.CreateCall(
                        declare_extern("halide_error_buffer_argument_is_null", i32, {ptr, ptr}),
                        {fs->user_context, builder.CreateGlobalStringPtr(name)});
                });
            } else {
                push_var(a.name, v);
            }
        }
        for (const auto &kv : state.arg_buffers) {
            llvm::Value *field = builder.CreateStructGEP(buffer_t, kv.second, buffer_host_field);
            state.arg_hosts[kv.first] = builder.CreateLoad(ptr, field, kv.first + ".host");
        }
        codegen(f.body);
        end_function();
        fs = nullptr;
        fn = nullptr;
        vars.clear();
        buffers.clear();
    }

    void define_argv_wrapper(const LoweredFunc &f) {
        llvm::Function *target = functions.at(f.name);
        llvm::FunctionType *ft = llvm::FunctionType::get(i32, {ptr}, false);
        llvm::Function *w = llvm::Function::Create(ft, llvm::Function::ExternalLinkage,
                                                   entry_symbols(m, f).argv, mod);
        llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx, "entry", w);
        builder.SetInsertPoint(entry);
        std::vector<llvm::Value *> args;
        for (size_t i = 0; i < f.args.size(); i++) {
            llvm::Value *slot =
                builder.CreateLoad(ptr, builder.CreateConstInBoundsGEP1_64(ptr, w->getArg(0), i));
            if (f.args[i].is_buffer()) {
                args.push_back(slot);
            } else {
                args.push_back(builder.CreateLoad(target->getArg(i)->getType(), slot));
            }
        }
        builder.CreateRet(builder.CreateCall(target, args));
    }

    /** A constant halide_scalar_value_t holding `bound` (a constant, as Halide's range checks pass
     * it: int64, uint64 or float64) as a value of `t`, the scalar's type, or null when there is no
     * bound or `t` is not one the union holds by its bits (an integer, float32, float64). The
     * union's 8 bytes hold the value in its own type, little-endian, zero above. */
    llvm::Constant *scalar_value(const Expr &bound, const Type &t, const std::string &name) {
        llvm::Constant *null = llvm::ConstantPointerNull::get(builder.getPtrTy());
        if (!bound.defined() || !t.is_valid() || t.is_handle() || t.lanes() != 1) {
            return null;
        }
        uint64_t bits = 0;
        const FloatImm *fv = bound.as<FloatImm>();
        int64_t iv = 0;
        if (t.is_float()) {
            if (!fv || (t.bits() != 32 && t.bits() != 64)) {
                return null;
            }
            if (t.bits() == 32) {
                float v = float(fv->value);
                uint32_t b;
                std::memcpy(&b, &v, 4);
                bits = b;
            } else {
                std::memcpy(&bits, &fv->value, 8);
            }
        } else if (const UIntImm *u = bound.as<UIntImm>()) {
            bits = u->value;
        } else if (const_int_value(bound, &iv)) {
            bits = uint64_t(iv);
        } else {
            return null;
        }
        if (!t.is_float() && t.bits() < 64) {
            bits &= (uint64_t(1) << t.bits()) - 1;  // the value in its own width, zero above
        }
        auto *g = new llvm::GlobalVariable(*mod, i64, true, llvm::GlobalValue::PrivateLinkage,
                                           llvm::ConstantInt::get(i64, bits), name);
        g->setAlignment(llvm::Align(8));
        return g;
    }

    /** `<name>_metadata()`, returning a constant halide_filter_metadata_t (version 1) as Halide's
     * object does: each argument's name, kind, rank and type (describe_arguments), the target
     * and the function's name, and a scalar's range where Halide's checks give it. Its scalar
     * defaults and estimates are null, the text has none; a buffer of rank > 0 has, as in
     * Halide's, a buffer_estimates array of rank * 2 pointers, all null. */
    void define_metadata_getter(const LoweredFunc &f) {
        llvm::Type *i16 = builder.getInt16Ty();
        llvm::StructType *type_t = llvm::StructType::get(ctx, {i8, i8, i16});
        // name, kind, dimensions, type, scalar_def, scalar_min, scalar_max, scalar_estimate,
        // buffer_estimates
        llvm::StructType *arg_t =
            llvm::StructType::get(ctx, {ptr, i32, i32, type_t, ptr, ptr, ptr, ptr, ptr});
        // version, num_arguments, arguments, target, name
        llvm::StructType *meta_t = llvm::StructType::get(ctx, {i32, i32, ptr, ptr, ptr});
        llvm::Constant *null = llvm::ConstantPointerNull::get(builder.getPtrTy());
        std::vector<ArgumentDescription> described = describe_arguments(m, f);
        std::vector<llvm::Constant *> args;
        for (size_t i = 0; i < f.args.size(); i++) {
            const ArgumentDescription &d = described[i];
            llvm::Constant *type = llvm::ConstantStruct::get(
                type_t, {llvm::ConstantInt::get(i8, d.type.is_valid() ? int(d.type.code()) : 0),
                         llvm::ConstantInt::get(i8, d.type.is_valid() ? d.type.bits() : 0),
                         llvm::ConstantInt::get(i16, 1)});
            llvm::Constant *estimates = null;
            if (d.kind != 0 && d.dimensions > 0) {
                auto *est_t = llvm::ArrayType::get(ptr, 2 * d.dimensions);
                estimates = new llvm::GlobalVariable(
                    *mod, est_t, true, llvm::GlobalValue::PrivateLinkage,
                    llvm::ConstantAggregateZero::get(est_t), f.args[i].name + ".estimates");
            }
            args.push_back(llvm::ConstantStruct::get(
                arg_t,
                {builder.CreateGlobalStringPtr(f.args[i].name, "arg_name", 0, mod),
                 llvm::ConstantInt::get(i32, d.kind), llvm::ConstantInt::get(i32, d.dimensions),
                 type, null, scalar_value(d.min, d.type, f.args[i].name + ".min"),
                 scalar_value(d.max, d.type, f.args[i].name + ".max"), null, estimates}));
        }
        auto *args_t = llvm::ArrayType::get(arg_t, args.size());
        auto *args_g = new llvm::GlobalVariable(
            *mod, args_t, true, llvm::GlobalValue::PrivateLinkage,
            llvm::ConstantArray::get(args_t, args), f.name + "_metadata_arguments");
        const EntrySymbols symbols = entry_symbols(m, f);
        auto *meta_g = new llvm::GlobalVariable(
            *mod, meta_t, true, llvm::GlobalValue::PrivateLinkage,
            llvm::ConstantStruct::get(
                meta_t,
                {llvm::ConstantInt::get(i32, 1), llvm::ConstantInt::get(i32, int(args.size())),
                 args.empty() ? null : static_cast<llvm::Constant *>(args_g),
                 builder.CreateGlobalStringPtr(m.target.to_string(), "target", 0, mod),
                 builder.CreateGlobalStringPtr(symbols.name, "name", 0, mod)}),
            f.name + "_metadata_storage");
        llvm::Function *getter =
            llvm::Function::Create(llvm::FunctionType::get(ptr, {}, false),
                                   llvm::Function::ExternalLinkage, symbols.metadata, mod);
        builder.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", getter));
        builder.CreateRet(meta_g);
    }
};

}  // namespace

std::unique_ptr<llvm::Module> codegen_host(const Module &m, llvm::LLVMContext &ctx,
                                           llvm::TargetMachine &tm,
                                           const std::vector<CompiledKernel> &kernels) {
    return CodeGen(m, ctx, tm, kernels).run();
}

}  // namespace tally
