#version 450
// buf[i] += k for i < n. Arguments: buffer 0 = buf (int32); push constants k (offset 0), n (4).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0, std430) buffer Buf0 { int data[]; } buf;
layout(push_constant, std430) uniform Args { int k; int n; } args;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < uint(args.n)) {
        buf.data[i] += args.k;
    }
}
