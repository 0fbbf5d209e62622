// The runtime-call table and its recognizers and builders (see RuntimeCalls.h for why they live
// in src/ir/). Runtime names are spelled only in the header's lists; names that follow a pattern
// (`halide_<api>_run`, `halide_<api>_device_interface`) are composed here and nowhere else.

#include "ir/RuntimeCalls.h"

#include "tally_runtime.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <string>

#include "tally/Error.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

const char *const buffer_suffix = ".buffer";
const char *const runtime_prefix = "halide_";
const char *const launch_suffix = "_run";
const char *const interface_suffix = "_device_interface";
const char *const error_prefix = "halide_error_";  // Halide's checks: halide_error_bad_type, ...
const char *const buffer_intrinsic_prefix = "_halide_buffer_";  // TALLY_BUFFER_INTRINSICS and kin
const char *const stride_infix = ".stride.";  // `X.stride.N`, Halide's name for a stride

// The APIs that name a GPU, in DeviceAPI order.
const DeviceAPI gpu_apis[] = {DeviceAPI::CUDA,         DeviceAPI::OpenCL,  DeviceAPI::OpenGLCompute,
                              DeviceAPI::Metal,        DeviceAPI::Hexagon, DeviceAPI::HexagonDma,
                              DeviceAPI::D3D12Compute, DeviceAPI::Vulkan,  DeviceAPI::WebGPU};

Expr strip_casts(Expr e) {
    while (const Cast *c = e.as<Cast>()) {
        e = c->value;
    }
    return e;
}

/** The GPU API `name` is `halide_<api><suffix>` for, or DeviceAPI::None. */
DeviceAPI api_in_name(const std::string &name, const std::string &suffix) {
    for (DeviceAPI api : gpu_apis) {
        if (name == runtime_prefix + runtime_api_name(api) + suffix) {
            return api;
        }
    }
    return DeviceAPI::None;
}

}  // namespace

const RuntimeSymbol *find_runtime_symbol(const std::string &name) {
    static const RuntimeSymbol table[] = {
#define TALLY_X(n, sig) {#n, sig},
        TALLY_RUNTIME_SYMBOLS(TALLY_X)
#undef TALLY_X
    };
    for (const RuntimeSymbol &s : table) {
        if (name == s.name) {
            return &s;
        }
    }
    return nullptr;
}

size_t runtime_call_arity(const RuntimeSymbol &s) {
    const char *params = std::strchr(s.signature, ':') + 1;
    return std::strlen(params) - (*params == 'U' ? 1 : 0);
}

namespace {

/** The entry points an IR call of `name` may call, its own first (TALLY_RUNTIME_OVERLOADS);
 * empty when `name` has no overloads. */
std::vector<const RuntimeSymbol *> runtime_call_forms(const std::string &name) {
    static const std::pair<const char *, const char *> overloads[] = {
#define TALLY_X(n, entry) {runtime::n, runtime::entry},
        TALLY_RUNTIME_OVERLOADS(TALLY_X)
#undef TALLY_X
    };
    std::vector<const RuntimeSymbol *> forms;
    for (const auto &[halide_name, entry] : overloads) {
        if (name == halide_name) {
            if (forms.empty()) {
                forms.push_back(find_runtime_symbol(halide_name));
            }
            forms.push_back(find_runtime_symbol(entry));
        }
    }
    return forms;
}

}  // namespace

std::string runtime_call_arity_error(const std::string &name, size_t num_args) {
    std::vector<const RuntimeSymbol *> forms = runtime_call_forms(name);
    if (forms.empty()) {
        return "";
    }
    std::string each;
    for (const RuntimeSymbol *f : forms) {
        if (runtime_call_arity(*f) == num_args) {
            return "";
        }
        each += std::string(each.empty() ? "" : " or ") + std::to_string(runtime_call_arity(*f)) +
                " (" + f->name + ")";
    }
    return name + " called with " + std::to_string(num_args) + " argument" +
           (num_args == 1 ? "" : "s") + "; it takes " + each;
}

const RuntimeSymbol *find_runtime_call(const std::string &name, size_t num_args) {
    std::vector<const RuntimeSymbol *> forms = runtime_call_forms(name);
    if (forms.empty()) {
        return find_runtime_symbol(name);
    }
    for (const RuntimeSymbol *f : forms) {
        if (runtime_call_arity(*f) == num_args) {
            return f;
        }
    }
    return nullptr;
}

const RuntimeSymbol *resolve_runtime_call(const std::string &name, size_t num_args) {
    const RuntimeSymbol *s = find_runtime_call(name, num_args);
    user_assert(s || !find_runtime_symbol(name)) << runtime_call_arity_error(name, num_args);
    return s;
}

// --- buffer descriptors ----------------------------------------------------------------------

std::string buffer_var_name(const std::string &buffer) {
    return buffer + buffer_suffix;
}

Type buffer_ptr_type() {
    return Handle("halide_buffer_t");
}

Expr buffer_var(const std::string &buffer) {
    return Variable::make(buffer_ptr_type(), buffer_var_name(buffer));
}

std::string buffer_name_of(const std::string &var_name) {
    const size_t n = std::char_traits<char>::length(buffer_suffix);
    if (var_name.size() <= n || var_name.compare(var_name.size() - n, n, buffer_suffix) != 0) {
        return "";
    }
    return var_name.substr(0, var_name.size() - n);
}

std::string buffer_name_of(const Expr &e) {
    const Variable *v = strip_casts(e).as<Variable>();
    return v ? buffer_name_of(v->name) : "";
}

// --- checked calls ---------------------------------------------------------------------------

std::string result_name(const std::string &fn) {
    return fn + "_result";
}

Stmt result_check(const std::string &result, Type t) {
    Expr r = Variable::make(t, result);
    return AssertStmt::make(EQ::make(r, make_zero(t)), r);
}

Stmt checked_call(const std::string &result, const Expr &call, const Stmt &rest) {
    Stmt check = result_check(result, call.type());
    return LetStmt::make(result, call, rest.defined() ? Block::make(check, rest) : check);
}

bool is_result_check(const Stmt &s, const std::string &result) {
    const AssertStmt *a = s.as<AssertStmt>();
    const EQ *eq = a ? a->condition.as<EQ>() : nullptr;
    const Variable *v = eq ? eq->a.as<Variable>() : nullptr;
    return v && v->name == result;
}

// --- copies, launches and device interfaces --------------------------------------------------

const Call *as_copy_call(const Expr &e, bool *to_device) {
    const Call *c = e.as<Call>();
    if (!c || c->args.empty()) {
        return nullptr;
    }
    bool device = c->name == runtime::halide_copy_to_device;
    if (!device && c->name != runtime::halide_copy_to_host) {
        return nullptr;
    }
    if (to_device) {
        *to_device = device;
    }
    return c;
}

DeviceAPI gpu_module_state_api(const std::string &name) {
    for (DeviceAPI api : gpu_apis) {
        if (name == runtime_api_name(api) + "_buf") {
            return api;
        }
    }
    return DeviceAPI::None;
}

std::string runtime_api_name(DeviceAPI api) {
    if (std::find(std::begin(gpu_apis), std::end(gpu_apis), api) == std::end(gpu_apis)) {
        return "";
    }
    std::string n = device_api_name(api);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    return n;
}

std::string launch_function(DeviceAPI api) {
    std::string n = runtime_api_name(api);
    internal_assert(!n.empty()) << "no launch function for device API " << device_api_name(api);
    return runtime_prefix + n + launch_suffix;
}

DeviceAPI launch_api(const Call *c) {
    return c ? api_in_name(c->name, launch_suffix) : DeviceAPI::None;
}

std::string device_interface_function(DeviceAPI api) {
    std::string n = runtime_api_name(api);
    internal_assert(!n.empty()) << "no device interface for device API " << device_api_name(api);
    return runtime_prefix + n + interface_suffix;
}

Expr device_interface_call(DeviceAPI api) {
    return Call::make(Handle("halide_device_interface_t"), device_interface_function(api), {},
                      Call::Extern);
}

DeviceAPI device_interface_api(const Expr &e) {
    const Call *c = e.as<Call>();
    // Only the call device_interface_call makes: a handle, no arguments. A call so named of
    // another type is something else (and replacing it by the interface would change its type).
    if (!c || !c->type.is_handle() || c->type.is_vector() || !c->args.empty()) {
        return DeviceAPI::None;
    }
    return api_in_name(c->name, interface_suffix);
}

int runtime_device_api(DeviceAPI api) {
    switch (api) {
    case DeviceAPI::CUDA:
        return TALLY_DEVICE_API_CUDA;
    case DeviceAPI::Vulkan:
        return TALLY_DEVICE_API_VULKAN;
    case DeviceAPI::OpenCL:
        return TALLY_DEVICE_API_OPENCL;
    default:
        return TALLY_DEVICE_API_NONE;
    }
}

DeviceAPI resolve_device_api(DeviceAPI api, const Target &t) {
    return api == DeviceAPI::DefaultGPU || api == DeviceAPI::None ? t.gpu_api() : api;
}

bool has_gpu_backend(DeviceAPI api) {
    return api == DeviceAPI::CUDA || api == DeviceAPI::Vulkan || api == DeviceAPI::OpenCL;
}

// --- parallel closures and pipeline functions ------------------------------------------------

std::string par_for_closure(const Expr &e) {
    const Call *c = e.as<Call>();
    if (!c || c->name != runtime::halide_do_par_for || c->args.empty()) {
        return "";
    }
    const Variable *v = strip_casts(c->args[0]).as<Variable>();
    return v && v->name.compare(0, 2, "::") == 0 ? v->name.substr(2) : "";
}

std::vector<std::string> task_closures(const Expr &e) {
    std::vector<std::string> out;
    const Call *c = e.as<Call>();
    if (!c) {
        return out;
    }
    if (c->name == runtime::halide_do_par_for) {
        std::string f = par_for_closure(e);
        if (!f.empty()) {
            out.push_back(f);
        }
        return out;
    }
    if (c->name != runtime::halide_do_parallel_tasks || c->args.size() < 3) {
        return out;
    }
    // The task array is one make_struct of the tasks' fields, fn first in each.
    const Call *tasks = strip_casts(c->args[2]).as<Call>();
    if (!tasks || !tasks->is_intrinsic(Call::make_struct)) {
        return out;
    }
    for (const Expr &field : tasks->args) {
        const Variable *v = strip_casts(field).as<Variable>();
        if (v && v->name.compare(0, 2, "::") == 0) {
            out.push_back(v->name.substr(2));
        }
    }
    return out;
}

std::set<std::string> par_for_closures(const Module &m) {
    class Find : public IRVisitor {
    public:
        std::set<std::string> names;

    private:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            for (const std::string &c : task_closures(op)) {
                names.insert(c);
            }
            IRVisitor::visit(op);
        }
    } find;
    for (const LoweredFunc &f : m.functions) {
        if (f.body.defined()) {
            f.body.accept(&find);
        }
    }
    return std::move(find.names);
}

bool is_pipeline_function(const LoweredFunc &f, const std::set<std::string> &closures) {
    return f.linkage != LinkageType::Internal && !closures.count(f.name);
}

std::vector<const LoweredFunc *> pipeline_functions(const Module &m) {
    std::set<std::string> closures = par_for_closures(m);
    std::vector<const LoweredFunc *> out;
    for (const LoweredFunc &f : m.functions) {
        if (is_pipeline_function(f, closures)) {
            out.push_back(&f);
        }
    }
    return out;
}

namespace {

/** Finds how code uses its buffers (BufferUse), and which closures it runs and kernels it
 * launches, so that buffer_uses can follow them. */
class FindBufferUses : public IRVisitor {
public:
    std::map<std::string, BufferUse> uses;
    std::vector<std::string> closures, kernels;

private:
    using IRVisitor::visit;

    void visit(const Store *op) override {
        uses[op->name].written = true;
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        uses[op->name].read = true;
        IRVisitor::visit(op);
    }
    void visit(const Variable *op) override {
        size_t at = op->name.rfind(stride_infix);
        if (at != std::string::npos && at > 0) {
            uses[op->name.substr(0, at)].reads_strides = true;
        }
    }
    void visit(const Call *op) override {
        std::string first = op->args.empty() ? "" : buffer_name_of(op->args[0]);
        if (!first.empty()) {
            if (op->name == runtime::_halide_buffer_set_device_dirty ||
                op->name == runtime::_halide_buffer_set_host_dirty) {
                uses[first].written = true;
            } else if (op->name == runtime::_halide_buffer_get_stride ||
                       op->name == runtime::_halide_buffer_get_shape) {
                uses[first].reads_strides = true;
            }
        }
        if (!reads_no_buffer(op)) {
            for (const Expr &a : op->args) {
                std::string b = buffer_name_of(a);
                if (!b.empty()) {
                    uses[b].read = true;
                }
            }
        }
        for (const std::string &c : task_closures(op)) {
            closures.push_back(c);
        }
        const StringImm *kernel = op->args.size() > 1 ? op->args[1].as<StringImm>() : nullptr;
        if (kernel && launch_api(op) != DeviceAPI::None) {
            kernels.push_back(kernel->value);
        }
        IRVisitor::visit(op);
    }

    /** Calls that take X.buffer without reading X's elements: buffer queries and dirty marks
     * (`_halide_buffer_*`), device management and copies, and the argument structs of kernel
     * launches (make_struct). */
    static bool reads_no_buffer(const Call *op) {
        static const std::set<std::string> calls = {
            runtime::halide_copy_to_device,
            runtime::halide_copy_to_host,
            runtime::halide_device_malloc,
            runtime::halide_device_free,
            runtime::halide_device_sync,
            runtime::halide_device_and_host_malloc,
            runtime::halide_device_and_host_free,
            runtime::halide_device_free_as_destructor,
            runtime::halide_device_and_host_free_as_destructor,
            Call::intrinsic_name(Call::make_struct),
            Call::intrinsic_name(Call::register_destructor)};
        const std::string &n = op->name;
        return n.compare(0, std::strlen(buffer_intrinsic_prefix), buffer_intrinsic_prefix) == 0 ||
               calls.count(n) > 0;
    }
};

}  // namespace

std::map<std::string, BufferUse> buffer_uses(const Module &m, const LoweredFunc &f) {
    FindBufferUses find;
    // The function, then each closure and kernel it reaches, once.
    std::set<std::string> functions_seen = {f.name}, kernels_seen;
    if (f.body.defined()) {
        f.body.accept(&find);
    }
    while (!find.closures.empty() || !find.kernels.empty()) {
        std::vector<std::string> closures = std::move(find.closures),
                                 kernels = std::move(find.kernels);
        find.closures.clear();
        find.kernels.clear();
        for (const std::string &c : closures) {
            const LoweredFunc *g = m.find_function(c);
            if (g && g->body.defined() && functions_seen.insert(c).second) {
                g->body.accept(&find);
            }
        }
        for (const std::string &k : kernels) {
            const Kernel *kernel = m.find_kernel(k);
            if (kernel && kernel->body.defined() && kernels_seen.insert(k).second) {
                kernel->body.accept(&find);
            }
        }
    }
    return std::move(find.uses);
}

namespace {

/** Halide's checks of a pipeline's buffer arguments. */
class FindArgumentRoles : public IRVisitor {
public:
    std::map<std::string, bool> output;  // buffer -> named "Output buffer" (else "Input buffer")
    std::map<std::string, int> checked_rank;
    std::map<std::string, Type> checked_type;
    std::map<std::string, Expr> scalar_min, scalar_max;

private:
    using IRVisitor::visit;

    void visit(const Call *op) override {
        IRVisitor::visit(op);
        const StringImm *what = op->args.empty() ? nullptr : op->args[0].as<StringImm>();
        if (!what || op->name.compare(0, std::strlen(error_prefix), error_prefix) != 0) {
            return;
        }
        static const char *const too_small[] = {runtime::halide_error_param_too_small_i64,
                                                runtime::halide_error_param_too_small_u64,
                                                runtime::halide_error_param_too_small_f64};
        static const char *const too_large[] = {runtime::halide_error_param_too_large_i64,
                                                runtime::halide_error_param_too_large_u64,
                                                runtime::halide_error_param_too_large_f64};
        for (int i = 0; i < 3 && op->args.size() == 3 && is_const(op->args[2]); i++) {
            if (op->name == too_small[i]) {
                scalar_min[what->value] = op->args[2];
            } else if (op->name == too_large[i]) {
                scalar_max[what->value] = op->args[2];
            }
        }
        static const std::pair<const char *, bool> roles[] = {{"Input buffer ", false},
                                                              {"Output buffer ", true}};
        for (const auto &[prefix, is_output] : roles) {
            size_t n = std::strlen(prefix);
            if (what->value.compare(0, n, prefix) != 0) {
                continue;
            }
            std::string buffer = what->value.substr(n);
            output[buffer] = is_output;
            int64_t rank;
            if (op->name == runtime::halide_error_bad_dimensions && op->args.size() == 3 &&
                const_int_value(op->args[2], &rank) && rank >= 0 && rank < 64) {
                checked_rank[buffer] = int(rank);
            }
            int64_t code;
            if (op->name == runtime::halide_error_bad_type && op->args.size() == 3 &&
                const_int_value(op->args[2], &code) && code >= 0 && code <= 0xffffffffll) {
                Type t = Type::from_halide_type_code(uint32_t(code));
                if (t.is_valid()) {
                    checked_type[buffer] = t;
                }
            }
        }
    }
};

}  // namespace

std::vector<ArgumentDescription> describe_arguments(const Module &m, const LoweredFunc &f) {
    FindArgumentRoles roles;
    if (f.body.defined()) {
        f.body.accept(&roles);
    }
    std::map<std::string, BufferUse> uses = buffer_uses(m, f);
    std::vector<ArgumentDescription> out;
    for (const Argument &a : f.args) {
        if (!a.is_buffer()) {
            ArgumentDescription d{
                0, 0, a.name == "__user_context" ? Handle("void") : a.type, {}, {}};
            auto lo = roles.scalar_min.find(a.name), hi = roles.scalar_max.find(a.name);
            d.min = lo == roles.scalar_min.end() ? Expr() : lo->second;
            d.max = hi == roles.scalar_max.end() ? Expr() : hi->second;
            out.push_back(d);
            continue;
        }
        auto role = roles.output.find(a.name);
        auto use = uses.find(a.name);
        bool is_output =
            role != roles.output.end() ? role->second : use != uses.end() && use->second.written;
        auto rank = roles.checked_rank.find(a.name);
        int dims = rank != roles.checked_rank.end() ? rank->second : std::max(a.dimensions, 0);
        auto type = roles.checked_type.find(a.name);
        out.push_back({is_output ? 2 : 1,
                       dims,
                       type != roles.checked_type.end() ? type->second : a.type,
                       {},
                       {}});
    }
    return out;
}

}  // namespace tally
