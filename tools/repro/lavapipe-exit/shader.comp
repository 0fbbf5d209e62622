#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const int K = 1;
layout(constant_id = 1) const int ITERS = 256;
layout(std430, binding = 0) buffer B { vec4 data[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    vec4 v = data[i];
    ivec4 w = ivec4(v * 7.0) ^ ivec4(K);
    for (int j = 0; j < ITERS; j++) {
        v = sin(v * float(K + j)) + cos(v.yzwx) * exp(-abs(v.wxyz));
        w = (w * ivec4(K, 3, 5, 7) + ivec4(j)) >> ivec4(1, 2, 3, K & 7);
        if ((j & K) == 1) v = normalize(v + vec4(w));
    }
    data[i] = v + vec4(w);
}
