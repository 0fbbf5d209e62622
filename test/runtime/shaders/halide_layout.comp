#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
// A kernel laid out as Halide 21's Vulkan kernels are (VulkanTest.cpp wraps it in Halide's module
// and binding header): its scalars packed in order into a uniform block at binding 0 (an int64 at
// 0, then two int32 at 8 and 12), its buffers at bindings 1 and 2, and the work group's x size and
// a shared array's length set by specialization constants 1 and 2. Each work group reverses its
// part of `in` through the shared array: out[g] = in[mirrored g] * scale + offset + (big >> 32).
layout(local_size_x_id = 1) in;
layout(constant_id = 2) const uint kTileLength = 1;
layout(set = 0, binding = 0, std140) uniform Args {
    int64_t big;
    int scale;
    int offset;
} args;
layout(set = 0, binding = 1, std430) buffer Out { int data[]; } outp;
layout(set = 0, binding = 2, std430) readonly buffer In { int data[]; } inp;
shared int tile[kTileLength];
void main() {
    uint l = gl_LocalInvocationID.x, n = gl_WorkGroupSize.x, g = gl_GlobalInvocationID.x;
    tile[l] = inp.data[g];
    barrier();
    outp.data[g] = tile[n - 1 - l] * args.scale + args.offset + int(args.big >> 32);
}
