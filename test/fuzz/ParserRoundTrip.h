/** \file
 * The property the parser fuzzer checks, shared with the unit test that replays
 * test/fuzz/regressions/ in the main build (test/unit/FuzzRegressionTest.cpp).
 *
 * For any text: parse_module either returns a module or throws CompileError (the expected outcome
 * for bad input). For a module that parsed, the verifier may accept it or throw CompileError, and
 * the printer must print text that parses back and prints the same again,
 * print(parse(print(m))) == print(m), to a module structurally equal to m. Anything else is a bug:
 * an InternalError or other exception, a round-trip mismatch (and, caught by the sanitizers rather
 * than here, a crash, a leak, a hang).
 */
#ifndef TALLY_TEST_FUZZ_PARSERROUNDTRIP_H
#define TALLY_TEST_FUZZ_PARSERROUNDTRIP_H

#include <exception>
#include <string>

#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/Parser.h"
#include "tally/Verifier.h"

namespace tally_fuzz {

/** Checks the property for `text`; returns "" when it holds, else what went wrong. */
inline std::string check_parser_round_trip(const std::string &text) {
    const char *stage = "parse_module";
    try {
        tally::Module m;
        try {
            m = tally::parse_module(text, "<fuzz>");
        } catch (const tally::CompileError &) {
            return "";  // rejected with a diagnostic
        }
        stage = "verify";
        try {
            tally::verify(m);
        } catch (const tally::CompileError &) {
            // Parsed but invalid: still printable, so the round trip below applies as well.
        }
        stage = "printing the parsed module";
        const std::string once = tally::to_string(m);
        stage = "parsing the printed module";
        tally::Module again;
        try {
            again = tally::parse_module(once, "<printed>");
        } catch (const tally::CompileError &e) {
            return std::string("the printer's output does not parse: ") + e.what() +
                   "\n--- printed:\n" + once;
        }
        stage = "printing the re-parsed module";
        const std::string twice = tally::to_string(again);
        if (twice != once) {
            return "print(parse(print(m))) != print(m)\n--- print(m):\n" + once +
                   "\n--- print(parse(print(m))):\n" + twice;
        }
        // Equal text is not enough: a name read back as a keyword's form prints the same.
        stage = "comparing the re-parsed module";
        std::string why;
        if (!tally::equal(m, again, &why)) {
            return "parse(print(m)) is not structurally equal to m: " + why + "\n--- print(m):\n" +
                   once;
        }
        return "";
    } catch (const tally::InternalError &e) {
        return std::string("InternalError in ") + stage + ": " + e.what();
    } catch (const std::exception &e) {
        return std::string("unexpected exception in ") + stage + ": " + e.what();
    } catch (...) {
        return std::string("unexpected non-standard exception in ") + stage;
    }
}

}  // namespace tally_fuzz

#endif  // TALLY_TEST_FUZZ_PARSERROUNDTRIP_H
