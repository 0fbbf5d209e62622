/** \file
 * A strict JSON checker (RFC 8259) for the report fuzzer: one value and nothing after it but
 * whitespace; strings in valid UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF), with no raw control characters and only the escapes JSON defines, `\u` surrogates
 * paired; numbers in JSON's grammar (no NaN, Infinity, leading zeros or bare dots); nesting
 * bounded. It checks; it builds nothing.
 */
#ifndef TALLY_TEST_FUZZ_STRICTJSON_H
#define TALLY_TEST_FUZZ_STRICTJSON_H

#include <cstddef>
#include <string>

namespace tally_fuzz {

class StrictJson {
public:
    /** "" if `text` is one valid JSON document, else what is wrong and where. */
    static std::string check(const std::string &text) {
        StrictJson j(text);
        if (!j.value(0)) {
            return j.error;
        }
        j.space();
        if (j.pos != text.size()) {
            return j.fail("text after the JSON value"), j.error;
        }
        return "";
    }

private:
    const std::string &s;
    size_t pos = 0;
    std::string error;

    explicit StrictJson(const std::string &text) : s(text) {}

    bool fail(const char *what) {
        error = std::string(what) + " at byte " + std::to_string(pos);
        return false;
    }
    int peek() const { return pos < s.size() ? (unsigned char)s[pos] : -1; }
    void space() {
        while (pos < s.size() &&
               (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r')) {
            pos++;
        }
    }
    bool literal(const char *word) {
        for (const char *c = word; *c; c++, pos++) {
            if (peek() != *c) {
                return fail("bad literal");
            }
        }
        return true;
    }
    bool value(int depth) {
        if (depth > 64) {
            return fail("nesting deeper than 64");
        }
        space();
        switch (peek()) {
        case '{':
            return object(depth);
        case '[':
            return array(depth);
        case '"':
            return string();
        case 't':
            return literal("true");
        case 'f':
            return literal("false");
        case 'n':
            return literal("null");
        default:
            return number();
        }
    }
    bool object(int depth) {
        pos++;  // {
        space();
        if (peek() == '}') {
            pos++;
            return true;
        }
        while (true) {
            space();
            if (peek() != '"') {
                return fail("expected a string key");
            }
            if (!string()) {
                return false;
            }
            space();
            if (peek() != ':') {
                return fail("expected ':'");
            }
            pos++;
            if (!value(depth + 1)) {
                return false;
            }
            space();
            if (peek() == ',') {
                pos++;
                continue;
            }
            if (peek() == '}') {
                pos++;
                return true;
            }
            return fail("expected ',' or '}'");
        }
    }
    bool array(int depth) {
        pos++;  // [
        space();
        if (peek() == ']') {
            pos++;
            return true;
        }
        while (true) {
            if (!value(depth + 1)) {
                return false;
            }
            space();
            if (peek() == ',') {
                pos++;
                continue;
            }
            if (peek() == ']') {
                pos++;
                return true;
            }
            return fail("expected ',' or ']'");
        }
    }
    bool digits() {
        size_t start = pos;
        while (peek() >= '0' && peek() <= '9') {
            pos++;
        }
        return pos > start;
    }
    bool number() {
        if (peek() == '-') {
            pos++;
        }
        if (peek() == '0') {
            pos++;
        } else if (!digits()) {
            return fail("expected a value");
        }
        if (peek() == '.') {
            pos++;
            if (!digits()) {
                return fail("expected digits after '.'");
            }
        }
        if (peek() == 'e' || peek() == 'E') {
            pos++;
            if (peek() == '+' || peek() == '-') {
                pos++;
            }
            if (!digits()) {
                return fail("expected exponent digits");
            }
        }
        return true;
    }
    int hex4() {
        int v = 0;
        for (int i = 0; i < 4; i++, pos++) {
            int c = peek();
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0) {
                return -1;
            }
            v = v * 16 + d;
        }
        return v;
    }
    bool string() {
        pos++;  // "
        while (true) {
            int c = peek();
            if (c < 0) {
                return fail("unterminated string");
            }
            if (c == '"') {
                pos++;
                return true;
            }
            if (c < 0x20) {
                return fail("raw control character in a string");
            }
            if (c == '\\') {
                pos++;
                int e = peek();
                pos++;
                if (e == 'u') {
                    int u = hex4();
                    if (u < 0) {
                        return fail("bad \\u escape");
                    }
                    if (u >= 0xdc00 && u <= 0xdfff) {
                        return fail("unpaired low surrogate escape");
                    }
                    if (u >= 0xd800 && u <= 0xdbff) {
                        if (peek() != '\\' || pos + 1 >= s.size() || s[pos + 1] != 'u') {
                            return fail("unpaired high surrogate escape");
                        }
                        pos += 2;
                        int lo = hex4();
                        if (lo < 0xdc00 || lo > 0xdfff) {
                            return fail("bad low surrogate escape");
                        }
                    }
                } else if (e < 0 || std::string("\"\\/bfnrt").find(char(e)) == std::string::npos) {
                    return fail("unknown escape");
                }
                continue;
            }
            if (c < 0x80) {
                pos++;
                continue;
            }
            if (!utf8()) {
                return false;
            }
        }
    }
    /** One multi-byte UTF-8 sequence (Unicode's table 3-7 of well-formed sequences). */
    bool utf8() {
        int c = peek();
        int n = 0, lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            lo = c == 0xe0 ? 0xa0 : 0x80;
            hi = c == 0xed ? 0x9f : 0xbf;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            lo = c == 0xf0 ? 0x90 : 0x80;
            hi = c == 0xf4 ? 0x8f : 0xbf;
        } else {
            return fail("invalid UTF-8 lead byte in a string");
        }
        pos++;
        for (int i = 0; i < n; i++, pos++) {
            int b = peek();
            if (b < (i == 0 ? lo : 0x80) || b > (i == 0 ? hi : 0xbf)) {
                return fail("invalid UTF-8 continuation in a string");
            }
        }
        return true;
    }
};

}  // namespace tally_fuzz

#endif  // TALLY_TEST_FUZZ_STRICTJSON_H
