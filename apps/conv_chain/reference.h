/** \file
 * Plain C++ reference for apps/conv_chain/conv_chain.stmt: three 3x3 conv + ReLU layers.
 */
#ifndef TALLY_APPS_CONV_CHAIN_REFERENCE_H
#define TALLY_APPS_CONV_CHAIN_REFERENCE_H

namespace tally_apps {

/** Channel counts of the net: input, after layer 1, after layer 2, output. */
constexpr int conv_chain_c0 = 3, conv_chain_c1 = 8, conv_chain_c2 = 8, conv_chain_c3 = 4;

/** Runs the net. `input` is c0 x (height + 6) x (width + 6), `output` c3 x height x width, both
 * planar [c][y][x]; weights are [co][ci][ky][kx], biases [co]. Each layer computes
 * max(bias + sum over ci, ky, kx (in that order) of w * in, 0) in float32. */
void conv_chain_reference(const float *input, const float *w1, const float *b1, const float *w2,
                          const float *b2, const float *w3, const float *b3, float *output,
                          int width, int height);

}  // namespace tally_apps

#endif  // TALLY_APPS_CONV_CHAIN_REFERENCE_H
