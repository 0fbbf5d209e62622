#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
// Echoes its scalar arguments so the test can check the push-constant packing: a (int32, offset
// 0), b (int64, aligned to offset 8), c (float32, offset 16). Buffer 0 (int32) receives
// a, high and low words of b, the bits of c, and the work-group size.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0, std430) buffer Out { int data[]; } outp;
layout(push_constant, std430) uniform Args { int a; int64_t b; float c; } args;
void main() {
    if (gl_GlobalInvocationID == uvec3(0)) {
        outp.data[0] = args.a;
        outp.data[1] = int(args.b >> 32);
        outp.data[2] = int(args.b & 0xffffffffl);
        outp.data[3] = floatBitsToInt(args.c);
        outp.data[4] = int(gl_WorkGroupSize.x);
        outp.data[5] = int(gl_WorkGroupSize.y);
        outp.data[6] = int(gl_WorkGroupSize.z);
    }
}
