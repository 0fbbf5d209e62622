#version 450
// dst[i] = float(src[i]) * scale for i < n. Buffers: 0 = src (int32), 1 = dst (float32);
// push constants scale (offset 0), n (4).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0, std430) readonly buffer Src { int data[]; } src;
layout(set = 0, binding = 1, std430) writeonly buffer Dst { float data[]; } dst;
layout(push_constant, std430) uniform Args { float scale; int n; } args;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < uint(args.n)) {
        dst.data[i] = float(src.data[i]) * args.scale;
    }
}
