#version 450
// A deliberately slow kernel: each of n invocations runs a dependent integer hash chain of
// `iters` steps (which no compiler can shorten) and stores it. llvmpipe (lavapipe) ends a loop
// after 65535 iterations, so iters stays below that and the work grows with n instead.
// Buffer 0 = data (uint32); push constants iters (offset 0), n (4).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0, std430) buffer Data { uint data[]; } buf;
layout(push_constant, std430) uniform Args { int iters; int n; } args;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= uint(args.n)) {
        return;
    }
    uint h = buf.data[i] + i;
    for (int k = 0; k < args.iters; k++) {
        h = h * 1664525u + 1013904223u;
        h ^= h >> 13;
    }
    buf.data[i] = h;
}
