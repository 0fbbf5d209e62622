// Unit tests of src/ir/RuntimeCalls: the runtime-call table and each recognizer and builder, and
// the pipeline/closure rule on the cases where the copies it replaced disagreed.

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/RuntimeCalls.h"
#include "tally/IRPrinter.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally/Verifier.h"

namespace tally {
namespace {

Expr i32(int64_t v) {
    return IntImm::make(Int(32), v);
}

Expr extern_call(const std::string &name, std::vector<Expr> args, Type t = Int(32)) {
    return Call::make(t, name, std::move(args), Call::Extern);
}

TEST(RuntimeCalls, TableHasEveryConstantWithItsSignature) {
    const RuntimeSymbol *s = find_runtime_symbol(runtime::halide_copy_to_device);
    ASSERT_NE(s, nullptr);
    EXPECT_STREQ(s->name, "halide_copy_to_device");
    EXPECT_STREQ(s->signature, "i:UBD");
    EXPECT_NE(find_runtime_symbol(runtime::tally_profiler_start), nullptr);
    EXPECT_EQ(find_runtime_symbol("halide_no_such_call"), nullptr);
    // Buffer intrinsics are named constants, but take no user_context and have no entry.
    EXPECT_STREQ(runtime::_halide_buffer_init, "_halide_buffer_init");
    EXPECT_EQ(find_runtime_symbol(runtime::_halide_buffer_init), nullptr);
}

TEST(RuntimeCalls, HalideNamesWithTwoFormsResolveByArgumentCount) {
    // Halide 14's halide_profiler_set_current_func(state, token, func_id, sampling_token) and
    // Halide 21's (instance, func_id, sampling_token): one IR name, two runtime entry points.
    const RuntimeSymbol *v14 = resolve_runtime_call(runtime::halide_profiler_set_current_func, 4);
    ASSERT_NE(v14, nullptr);
    EXPECT_STREQ(v14->name, "halide_profiler_set_current_func");
    EXPECT_STREQ(v14->signature, "i:piip");
    const RuntimeSymbol *v21 = resolve_runtime_call(runtime::halide_profiler_set_current_func, 3);
    ASSERT_NE(v21, nullptr);
    EXPECT_STREQ(v21->name, "tally_halide21_profiler_set_current_func");
    EXPECT_STREQ(v21->signature, "i:pip");
    // The name alone gives Halide's own entry.
    EXPECT_EQ(find_runtime_symbol(runtime::halide_profiler_set_current_func), v14);
    // Any other count is an error naming both forms.
    try {
        resolve_runtime_call(runtime::halide_profiler_set_current_func, 2);
        FAIL() << "a 2-argument call resolved";
    } catch (const CompileError &e) {
        std::string m = e.what();
        EXPECT_NE(m.find("called with 2 arguments; it takes 4 (halide_profiler_set_current_func) "
                         "or 3 (tally_halide21_profiler_set_current_func)"),
                  std::string::npos)
            << m;
    }
    EXPECT_EQ(find_runtime_call(runtime::halide_profiler_set_current_func, 2), nullptr);
    EXPECT_EQ(find_runtime_call(runtime::halide_profiler_set_current_func, 3), v21);
    EXPECT_NE(runtime_call_arity_error(runtime::halide_profiler_set_current_func, 5), "");
    EXPECT_EQ(runtime_call_arity_error(runtime::halide_profiler_set_current_func, 3), "");
    // debug_to_file: Halide 14's (filename, type code, buffer), Halide 21's (filename, buffer).
    const RuntimeSymbol *d14 = resolve_runtime_call(runtime::halide_debug_to_file, 3);
    const RuntimeSymbol *d21 = resolve_runtime_call(runtime::halide_debug_to_file, 2);
    ASSERT_NE(d14, nullptr);
    ASSERT_NE(d21, nullptr);
    EXPECT_STREQ(d14->name, "halide_debug_to_file");
    EXPECT_STREQ(d21->name, "tally_halide21_debug_to_file");
    EXPECT_STREQ(d21->signature, "i:UsB");
    EXPECT_NE(runtime_call_arity_error(runtime::halide_debug_to_file, 4), "");
    // Names without overloads resolve whatever the count (their arity is not this rule's), and
    // unknown names to nothing.
    EXPECT_EQ(runtime_call_arity_error(runtime::halide_copy_to_host, 7), "");
    EXPECT_EQ(resolve_runtime_call(runtime::halide_copy_to_host, 1),
              find_runtime_symbol(runtime::halide_copy_to_host));
    EXPECT_EQ(resolve_runtime_call("halide_no_such_call", 1), nullptr);
}

TEST(RuntimeCalls, ArityLeavesOutTheUserContext) {
    EXPECT_EQ(runtime_call_arity(*find_runtime_symbol(runtime::halide_copy_to_device)), 2u);
    EXPECT_EQ(runtime_call_arity(*find_runtime_symbol(runtime::halide_profiler_instance_start)),
              4u);
    EXPECT_EQ(runtime_call_arity(*find_runtime_symbol(runtime::halide_profiler_enable_instance)),
              1u);
    EXPECT_EQ(runtime_call_arity(*find_runtime_symbol(runtime::halide_host_device_interface)), 0u);
}

TEST(RuntimeCalls, VerifierRejectsACountNoFormTakes) {
    Module ok = parse_module(R"(module name=v, target=host
external func v (out: buffer<int32, 1>) {
allocate profiler_instance[uint64 * 32]
halide_profiler_set_current_func(profiler_instance, 2, (void *)reinterpret((uint64)0))
free profiler_instance
out[0] = 0
}
)");
    EXPECT_NO_THROW(verify(ok));
    Module bad = parse_module(R"(module name=v, target=host
external func v (out: buffer<int32, 1>) {
halide_profiler_set_current_func((void *)reinterpret((uint64)0), 2)
out[0] = 0
}
)");
    try {
        verify(bad);
        FAIL() << "a 2-argument halide_profiler_set_current_func verified";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("tally_halide21_profiler_set_current_func"),
                  std::string::npos)
            << e.what();
    }
}

TEST(RuntimeCalls, BufferNamesRoundTrip) {
    EXPECT_EQ(buffer_var_name("A"), "A.buffer");
    EXPECT_EQ(buffer_name_of(std::string("A.buffer")), "A");
    EXPECT_EQ(buffer_name_of(std::string("f.0.buffer")), "f.0");
    // A name that is only the suffix, or lacks it, names no buffer.
    EXPECT_EQ(buffer_name_of(std::string(".buffer")), "");
    EXPECT_EQ(buffer_name_of(std::string("A.buffers")), "");
    EXPECT_EQ(buffer_name_of(std::string("A")), "");

    Expr v = buffer_var("A");
    EXPECT_EQ(v.type(), Handle("halide_buffer_t"));
    EXPECT_EQ(v.as<Variable>()->name, "A.buffer");
    EXPECT_EQ(buffer_name_of(v), "A");
    // Halide writes `(halide_buffer_t *)A.buffer`: the cast is seen through.
    EXPECT_EQ(buffer_name_of(Cast::make(Handle(), v)), "A");
    EXPECT_EQ(buffer_name_of(Variable::make(Int(32), "x")), "");
    EXPECT_EQ(buffer_name_of(i32(0)), "");
}

TEST(RuntimeCalls, CheckedCallIsLetThenAssert) {
    Expr call = extern_call(runtime::halide_copy_to_host, {buffer_var("A")});
    std::string r = result_name(runtime::halide_copy_to_host);
    EXPECT_EQ(r, "halide_copy_to_host_result");
    Stmt rest = Evaluate::make(i32(0));
    Stmt s = checked_call(r, call, rest);
    EXPECT_EQ(to_string(s),
              "let halide_copy_to_host_result = halide_copy_to_host((halide_buffer_t *)A.buffer)\n"
              "assert(halide_copy_to_host_result == 0, halide_copy_to_host_result)\n"
              "0\n");
    const LetStmt *l = s.as<LetStmt>();
    ASSERT_NE(l, nullptr);
    const Block *b = l->body.as<Block>();
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(is_result_check(b->first, r));
    EXPECT_FALSE(is_result_check(b->first, "other"));
    EXPECT_FALSE(is_result_check(rest, r));
    // Without a rest, the check is the whole body.
    EXPECT_TRUE(is_result_check(checked_call(r, call).as<LetStmt>()->body, r));
    EXPECT_TRUE(is_result_check(result_check("x"), "x"));
}

TEST(RuntimeCalls, RecognizesCopiesAndTheirDirection) {
    bool to_device = false;
    Expr up = extern_call(runtime::halide_copy_to_device,
                          {buffer_var("A"), device_interface_call(DeviceAPI::Vulkan)});
    EXPECT_EQ(as_copy_call(up, &to_device), up.as<Call>());
    EXPECT_TRUE(to_device);
    Expr down = extern_call(runtime::halide_copy_to_host, {buffer_var("A")});
    EXPECT_EQ(as_copy_call(down, &to_device), down.as<Call>());
    EXPECT_FALSE(to_device);
    EXPECT_NE(as_copy_call(down), nullptr);
    // A copy names its buffer; other calls and non-calls are no copies.
    EXPECT_EQ(as_copy_call(extern_call(runtime::halide_copy_to_host, {})), nullptr);
    EXPECT_EQ(as_copy_call(extern_call(runtime::halide_device_malloc, {buffer_var("A")})), nullptr);
    EXPECT_EQ(as_copy_call(i32(1)), nullptr);
}

TEST(RuntimeCalls, NamesLaunchesAndInterfacesPerApi) {
    EXPECT_EQ(runtime_api_name(DeviceAPI::CUDA), "cuda");
    EXPECT_EQ(runtime_api_name(DeviceAPI::OpenCL), "opencl");
    EXPECT_EQ(runtime_api_name(DeviceAPI::DefaultGPU), "");
    EXPECT_EQ(runtime_api_name(DeviceAPI::Host), "");
    EXPECT_EQ(launch_function(DeviceAPI::Vulkan), "halide_vulkan_run");
    EXPECT_EQ(launch_function(DeviceAPI::CUDA), "halide_cuda_run");
    // The two with back ends are runtime entry points.
    EXPECT_NE(find_runtime_symbol(launch_function(DeviceAPI::CUDA)), nullptr);
    EXPECT_NE(find_runtime_symbol(device_interface_function(DeviceAPI::Vulkan)), nullptr);

    Expr launch = extern_call("halide_cuda_run", {});
    EXPECT_EQ(launch_api(launch.as<Call>()), DeviceAPI::CUDA);
    // Halide's own launches of APIs without a back end are launches too.
    EXPECT_EQ(launch_api(extern_call("halide_opencl_run", {}).as<Call>()), DeviceAPI::OpenCL);
    EXPECT_EQ(launch_api(extern_call("halide_device_run", {}).as<Call>()), DeviceAPI::None);
    EXPECT_EQ(launch_api(extern_call(runtime::halide_do_par_for, {}).as<Call>()), DeviceAPI::None);
    EXPECT_EQ(launch_api(nullptr), DeviceAPI::None);

    Expr iface = device_interface_call(DeviceAPI::CUDA);
    EXPECT_EQ(to_string(iface), "(halide_device_interface_t *)halide_cuda_device_interface()");
    EXPECT_EQ(iface.type(), Handle("halide_device_interface_t"));
    EXPECT_EQ(device_interface_api(iface), DeviceAPI::CUDA);
    EXPECT_EQ(device_interface_api(device_interface_call(DeviceAPI::Metal)), DeviceAPI::Metal);
    EXPECT_EQ(device_interface_api(extern_call(runtime::halide_host_device_interface, {})),
              DeviceAPI::None);
    EXPECT_EQ(device_interface_api(i32(0)), DeviceAPI::None);
}

TEST(RuntimeCalls, DefaultGpuTakesTheTargetsApi) {
    Target vulkan = Target::parse("host-vulkan"), cuda = Target::parse("host-cuda");
    Target host = Target::parse("host");
    EXPECT_EQ(resolve_device_api(DeviceAPI::DefaultGPU, vulkan), DeviceAPI::Vulkan);
    EXPECT_EQ(resolve_device_api(DeviceAPI::DefaultGPU, cuda), DeviceAPI::CUDA);
    EXPECT_EQ(resolve_device_api(DeviceAPI::None, cuda), DeviceAPI::CUDA);
    // A target without a GPU leaves nothing to resolve to; an explicit API stands.
    EXPECT_EQ(resolve_device_api(DeviceAPI::DefaultGPU, host), DeviceAPI::None);
    EXPECT_EQ(resolve_device_api(DeviceAPI::CUDA, vulkan), DeviceAPI::CUDA);
    EXPECT_EQ(resolve_device_api(DeviceAPI::OpenCL, host), DeviceAPI::OpenCL);
    EXPECT_TRUE(has_gpu_backend(DeviceAPI::CUDA));
    EXPECT_TRUE(has_gpu_backend(DeviceAPI::Vulkan));
    EXPECT_TRUE(has_gpu_backend(DeviceAPI::OpenCL));
    EXPECT_FALSE(has_gpu_backend(DeviceAPI::Metal));
    EXPECT_EQ(resolve_device_api(DeviceAPI::DefaultGPU, Target::parse("host-opencl")),
              DeviceAPI::OpenCL);
    EXPECT_FALSE(has_gpu_backend(DeviceAPI::DefaultGPU));
}

TEST(RuntimeCalls, FindsParForClosuresThroughCasts) {
    Expr closure = Variable::make(Handle(), "::body");
    Expr call = extern_call(runtime::halide_do_par_for,
                            {Cast::make(Handle(), closure), i32(0), i32(8), i32(0)});
    EXPECT_EQ(par_for_closure(call), "body");
    // Only `::f` names a closure, and only in halide_do_par_for's first argument.
    EXPECT_EQ(par_for_closure(
                  extern_call(runtime::halide_do_par_for, {Variable::make(Handle(), "body")})),
              "");
    EXPECT_EQ(par_for_closure(extern_call("other", {closure})), "");
    EXPECT_EQ(par_for_closure(extern_call(runtime::halide_do_par_for, {})), "");
}

// The module the two old copies disagreed on: inject-profiling took every function no one runs
// as a closure for a pipeline, Internal ones included; code generation excluded Internal ones.
// Halide 14 prints its closures as `external func`, so a closure is known by its par_for call,
// and an Internal function (callable only from inside the module) is no entry point.
const char *const linkage_module = R"(module name=m, target=host
external func m_par_for_y (__user_context, y, closure_arg) {
  out[y] = 0
}
internal func m_internal_closure (__user_context, y, closure_arg) {
  out[y] = 1
}
internal func helper (out: buffer<int32, 1>) {
  out[0] = 2
}
external_plus_metadata func m (out: buffer<int32, 1>) {
  let a = halide_do_par_for((void *)::m_par_for_y, 0, 8, (void *)reinterpret((uint64)0))
  let b = halide_do_par_for((void *)::m_internal_closure, 0, 8, (void *)reinterpret((uint64)0))
  0
}
external func other (out: buffer<int32, 1>) {
  out[0] = 3
}
)";

TEST(RuntimeCalls, PipelinesAreEntryPointsThatAreNoClosures) {
    Module m = parse_module(linkage_module);
    std::set<std::string> closures = par_for_closures(m);
    EXPECT_EQ(closures, (std::set<std::string>{"m_par_for_y", "m_internal_closure"}));
    std::vector<std::string> names;
    for (const LoweredFunc *f : pipeline_functions(m)) {
        names.push_back(f->name);
    }
    EXPECT_EQ(names, (std::vector<std::string>{"m", "other"}));
    // The case the copies disagreed on: Internal, and no closure.
    const LoweredFunc *helper = m.find_function("helper");
    ASSERT_NE(helper, nullptr);
    EXPECT_FALSE(is_pipeline_function(*helper, closures));
    // An External closure, as Halide 14 prints them, is no pipeline.
    EXPECT_FALSE(is_pipeline_function(*m.find_function("m_par_for_y"), closures));
}

// Halide's metadata of a pipeline's arguments, from its own checks where the text has them
// (the roles, ranks and types below contradict what the body alone would say: `a` is written,
// `b`'s rank is 3 though the body queries none, `c`'s type is float32 though it is never read);
// without checks (no_asserts), from the body: a buffer stored to or marked device-dirty is an
// output, its rank the highest dimension queried (0 when none is), its type what the elaborator
// learned (`?`: nothing, which the metadata writes as code 0, 0 bits).
TEST(RuntimeCalls, ArgumentsAreDescribedAsHalidesMetadataDoes) {
    Module m = parse_module(R"(module name=m, target=host
external_plus_metadata func checked (__user_context, a, k, b, c) {
  let a.type = (uint32)_halide_buffer_get_type((halide_buffer_t *)a.buffer)
  let a.dimensions = _halide_buffer_get_dimensions((halide_buffer_t *)a.buffer)
  let b.dimensions = _halide_buffer_get_dimensions((halide_buffer_t *)b.buffer)
  let c.type = (uint32)_halide_buffer_get_type((halide_buffer_t *)c.buffer)
  let c.dimensions = _halide_buffer_get_dimensions((halide_buffer_t *)c.buffer)
  assert(a.type == (uint32)67585, halide_error_bad_type("Input buffer a", a.type, (uint32)67585))
  assert(a.dimensions == 1, halide_error_bad_dimensions("Input buffer a", a.dimensions, 1))
  assert(b.dimensions == 3, halide_error_bad_dimensions("Output buffer b", b.dimensions, 3))
  assert(c.type == (uint32)73730, halide_error_bad_type("Output buffer c", c.type, (uint32)73730))
  assert(c.dimensions == 0, halide_error_bad_dimensions("Output buffer c", c.dimensions, 0))
  let e = _halide_buffer_get_extent((halide_buffer_t *)a.buffer, 0)
  let f = _halide_buffer_get_host((halide_buffer_t *)b.buffer)
  let g = _halide_buffer_get_host((halide_buffer_t *)c.buffer)
  a[0] = (uint8)k
}
external_plus_metadata func unchecked (x, y, z) {
  let e = _halide_buffer_get_extent((halide_buffer_t *)x.buffer, 1)
  let f = _halide_buffer_get_host((halide_buffer_t *)z.buffer)
  let g = _halide_buffer_get_host((halide_buffer_t *)y.buffer)
  let d = _halide_buffer_set_device_dirty((halide_buffer_t *)z.buffer, (uint1)1)
  y[0] = (uint8)x[0]
}
)");
    auto describe = [&](const char *name) {
        std::vector<std::string> out;
        for (const ArgumentDescription &d : describe_arguments(m, *m.find_function(name))) {
            out.push_back(std::to_string(d.kind) + "/" + std::to_string(d.dimensions) + "/" +
                          (d.type.is_valid() ? d.type.to_string() : "?"));
        }
        return out;
    };
    EXPECT_EQ(describe("checked"), (std::vector<std::string>{"0/0/void *", "1/1/uint8", "0/0/uint8",
                                                             "2/3/?", "2/0/float32"}));
    EXPECT_EQ(describe("unchecked"), (std::vector<std::string>{"1/2/?", "2/0/uint8", "2/0/?"}));
}

// How a pipeline uses its buffers, the one rule the binder and Halide's metadata read
// (buffer_uses): a store in a closure the pipeline runs is a write, and so are host- and
// device-dirty marks; a copy to the host is no write (Halide copies inputs to the host as well);
// loads and calls handed `X.buffer` read; `X.stride.N` and the stride and shape queries read
// strides. A function the pipeline does not run (`other`, storing to `in`) is not looked at.
const char *const uses_module = R"(module name=u, target=host
external func u_par_for_y (__user_context, y, closure_arg) {
  par_out[y] = 1
}
external func u (in: buffer<int32, 1>, par_out: buffer<int32, 1>, marked: buffer<int32, 1>, fetched: buffer<int32, 1>, ext: buffer<int32, 1>, strided: buffer<int32, 1>, shaped: buffer<int32, 1>) {
  let a = halide_do_par_for((void *)::u_par_for_y, 0, 8, (void *)reinterpret((uint64)0))
  let b = _halide_buffer_set_host_dirty((halide_buffer_t *)marked.buffer, (uint1)1)
  let c = halide_copy_to_host((halide_buffer_t *)fetched.buffer)
  let d = (int32)extern_stage((halide_buffer_t *)ext.buffer)
  let e = (void *)_halide_buffer_get_shape((halide_buffer_t *)shaped.buffer)
  let strided.stride.0 = _halide_buffer_get_stride((halide_buffer_t *)strided.buffer, 0)
  strided[strided.stride.0 * 2] = in[0]
}
external func other (in: buffer<int32, 1>) {
  in[0] = 5
}
)";

std::string use_text(const std::map<std::string, BufferUse> &uses, const std::string &name) {
    auto it = uses.find(name);
    if (it == uses.end()) {
        return "-";
    }
    return std::string(it->second.read ? "r" : "") + (it->second.written ? "w" : "") +
           (it->second.reads_strides ? "s" : "");
}

TEST(RuntimeCalls, BufferUsesFollowClosuresAndDirtyMarks) {
    Module m = parse_module(uses_module);
    std::map<std::string, BufferUse> uses = buffer_uses(m, *m.find_function("u"));
    EXPECT_EQ(use_text(uses, "in"), "r");  // `other` writes it, but `u` does not run `other`
    EXPECT_EQ(use_text(uses, "par_out"), "w");
    EXPECT_EQ(use_text(uses, "marked"), "w");
    EXPECT_EQ(use_text(uses, "fetched"), "-");  // copied only: neither read nor written
    EXPECT_EQ(use_text(uses, "ext"), "r");
    EXPECT_EQ(use_text(uses, "strided"), "ws");
    EXPECT_EQ(use_text(uses, "shaped"), "s");
    // Halide's metadata, without Halide's checks in the text, reads the same rule.
    std::vector<int> kinds;
    for (const ArgumentDescription &d : describe_arguments(m, *m.find_function("u"))) {
        kinds.push_back(d.kind);
    }
    EXPECT_EQ(kinds, (std::vector<int>{1, 2, 2, 1, 1, 2, 1}));
}

// Kernels are part of the pipeline that launches them: after lowering for Vulkan the store to
// `out` lives in the kernel's body only, and the load of `in` too.
TEST(RuntimeCalls, BufferUsesFollowKernelLaunches) {
    Module m = lower(parse_module(R"(module name=k, target=host-vulkan
external func k (in: buffer<int32, 1>, out: buffer<int32, 1>) {
  produce out {
    gpu_block<Vulkan> (out.s0.b, 0, 4) {
      gpu_thread<Vulkan> (out.s0.t, 0, 8) {
        out[(out.s0.b * 8) + out.s0.t] = in[(out.s0.b * 8) + out.s0.t]
      }
    }
  }
}
)"),
                     Target::parse("host-vulkan"));
    ASSERT_EQ(m.kernels.size(), 1u);
    std::map<std::string, BufferUse> uses = buffer_uses(m, *m.find_function("k"));
    EXPECT_EQ(use_text(uses, "in"), "r");
    EXPECT_EQ(use_text(uses, "out"), "w");
    // Without the kernel, the host code alone would say nothing is read.
    Module no_kernels = m;
    no_kernels.kernels.clear();
    std::map<std::string, BufferUse> host_only = buffer_uses(no_kernels, *m.find_function("k"));
    EXPECT_EQ(use_text(host_only, "in"), "-");
    EXPECT_EQ(use_text(host_only, "out"), "w");  // its device-dirty mark
}

}  // namespace
}  // namespace tally
