/** \file
 * The property the lowering fuzzer checks (fuzz_lowering.cpp), shared with the unit test that
 * replays test/fuzz/regressions/ in the main build (test/unit/FuzzRegressionTest.cpp).
 *
 * For any text that parses and verifies, and for each target kind a user can ask for (host,
 * host-profile, host-vulkan-profile, host-cuda-profile, each with and without debug): `lower`
 * either returns a module or throws CompileError (a pass rejecting its input with a diagnostic);
 * a module it returns verifies, prints to text that parses back, and the re-parsed module is
 * structurally equal to it (tally/IREquality.h). Anything else is a bug: an InternalError or
 * other exception, a lowered module the verifier rejects, a printed module that does not parse
 * or reads back different (and, caught by the sanitizers rather than here, a crash, a leak, a
 * hang).
 */
#ifndef TALLY_TEST_FUZZ_LOWERINGROUNDTRIP_H
#define TALLY_TEST_FUZZ_LOWERINGROUNDTRIP_H

#include <exception>
#include <string>

#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally/Target.h"
#include "tally/Verifier.h"

namespace tally_fuzz {

/** The targets every input is lowered for. */
inline const char *const lowering_targets[] = {
    "host",
    "host-debug",
    "host-profile",
    "host-debug-profile",
    "host-profile-vulkan",
    "host-debug-profile-vulkan",
    "host-cuda-profile",
    "host-cuda-debug-profile",
};

/** Checks the property for `text`; returns "" when it holds, else what went wrong. */
inline std::string check_lowering_round_trip(const std::string &text) {
    std::string stage = "parse_module";
    try {
        tally::Module m;
        try {
            m = tally::parse_module(text, "<fuzz>");
            stage = "verify";
            tally::verify(m);
        } catch (const tally::CompileError &) {
            return "";  // rejected with a diagnostic: nothing to lower
        }
        for (const char *target : lowering_targets) {
            stage = std::string("lower for ") + target;
            tally::LowerOptions opts;
            // The verifier runs once at the end, below, so that a pass's user error (a
            // CompileError) is told apart from a pass that produced invalid IR (a finding).
            opts.verify_each_pass = false;
            tally::Module low;
            try {
                low = tally::lower(m, tally::Target::parse(target), opts);
            } catch (const tally::CompileError &) {
                continue;
            }
            stage = std::string("verifying the module lowered for ") + target;
            try {
                tally::verify(low);
            } catch (const tally::CompileError &e) {
                return stage + ": the lowered module is invalid: " + e.what() + "\n--- lowered:\n" +
                       tally::to_string(low);
            }
            stage = std::string("printing the module lowered for ") + target;
            const std::string printed = tally::to_string(low);
            stage = std::string("re-parsing the module lowered for ") + target;
            tally::Module again;
            try {
                again = tally::parse_module(printed, "<printed>");
            } catch (const tally::CompileError &e) {
                return stage + ": the printer's output does not parse: " + e.what() +
                       "\n--- printed:\n" + printed;
            }
            std::string why;
            if (!tally::equal(low, again, &why)) {
                return stage + ": parse(print(lower(m))) != lower(m): " + why + "\n--- printed:\n" +
                       printed;
            }
        }
        return "";
    } catch (const tally::InternalError &e) {
        return "InternalError in " + stage + ": " + e.what();
    } catch (const std::exception &e) {
        return "unexpected exception in " + stage + ": " + e.what();
    } catch (...) {
        return "unexpected non-standard exception in " + stage;
    }
}

}  // namespace tally_fuzz

#endif  // TALLY_TEST_FUZZ_LOWERINGROUNDTRIP_H
