// The conv_chain reference: one generic valid 3x3 convolution + ReLU, applied three times.

#include "reference.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tally_apps {

namespace {

/** out (cout x out_h x out_w) = relu(conv3x3(in (cin x (out_h + 2) x (out_w + 2)), w) + b). */
void conv3x3_relu(const float *in, int cin, const float *w, const float *b, float *out, int cout,
                  int out_w, int out_h) {
    const int in_w = out_w + 2, in_h = out_h + 2;
    for (int c = 0; c < cout; c++) {
        for (int y = 0; y < out_h; y++) {
            for (int x = 0; x < out_w; x++) {
                float acc = b[c];
                for (int ci = 0; ci < cin; ci++) {
                    for (int ky = 0; ky < 3; ky++) {
                        for (int kx = 0; kx < 3; kx++) {
                            float wv = w[((c * cin + ci) * 3 + ky) * 3 + kx];
                            float iv = in[(std::size_t(ci) * in_h + y + ky) * in_w + x + kx];
                            acc = acc + wv * iv;
                        }
                    }
                }
                out[(std::size_t(c) * out_h + y) * out_w + x] = std::max(acc, 0.0f);
            }
        }
    }
}

}  // namespace

void conv_chain_reference(const float *input, const float *w1, const float *b1, const float *w2,
                          const float *b2, const float *w3, const float *b3, float *output,
                          int width, int height) {
    std::vector<float> conv1(std::size_t(conv_chain_c1) * (width + 4) * (height + 4));
    std::vector<float> conv2(std::size_t(conv_chain_c2) * (width + 2) * (height + 2));
    conv3x3_relu(input, conv_chain_c0, w1, b1, conv1.data(), conv_chain_c1, width + 4, height + 4);
    conv3x3_relu(conv1.data(), conv_chain_c1, w2, b2, conv2.data(), conv_chain_c2, width + 2,
                 height + 2);
    conv3x3_relu(conv2.data(), conv_chain_c2, w3, b3, output, conv_chain_c3, width, height);
}

}  // namespace tally_apps
