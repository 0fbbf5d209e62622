// A small JSON reader for checking the profiler's JSON report in tests (objects, arrays, strings
// with the escapes the report uses, numbers, true/false/null). Strict: trailing garbage fails.
#ifndef TALLY_TEST_RUNTIME_JSON_H
#define TALLY_TEST_RUNTIME_JSON_H

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace tally_test {

struct Json {
    enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
    bool boolean = false;
    double number = 0;
    std::string str;
    std::vector<Json> items;
    std::vector<std::pair<std::string, Json>> members;

    bool has(const std::string &key) const {
        for (const auto &m : members) {
            if (m.first == key) {
                return true;
            }
        }
        return false;
    }
    const Json &operator[](const std::string &key) const {
        for (const auto &m : members) {
            if (m.first == key) {
                return m.second;
            }
        }
        static const Json null_value;
        return null_value;
    }
    const Json &operator[](size_t i) const {
        static const Json null_value;
        return i < items.size() ? items[i] : null_value;
    }
};

class JsonParser {
public:
    explicit JsonParser(const std::string &text) : p_(text.c_str()), end_(p_ + text.size()) {}

    // Parses the whole text; returns false (with a message in *error) on any syntax error.
    bool parse(Json *out, std::string *error) {
        bool ok = value(out);
        skip_space();
        if (ok && p_ != end_) {
            ok = fail("trailing characters");
        }
        if (!ok && error) {
            *error = error_;
        }
        return ok;
    }

private:
    bool fail(const char *msg) {
        if (error_.empty()) {
            error_ = std::string(msg) + " at: " + std::string(p_, std::min<size_t>(20, end_ - p_));
        }
        return false;
    }
    void skip_space() {
        while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\t' || *p_ == '\r')) {
            p_++;
        }
    }
    bool literal(const char *word) {
        size_t n = std::char_traits<char>::length(word);
        if (size_t(end_ - p_) < n || std::string(p_, n) != word) {
            return fail("bad literal");
        }
        p_ += n;
        return true;
    }
    bool string(std::string *out) {
        if (p_ >= end_ || *p_ != '"') {
            return fail("expected string");
        }
        p_++;
        while (p_ < end_ && *p_ != '"') {
            if ((unsigned char)*p_ < 0x20) {
                return fail("control character in string");
            }
            if (*p_ == '\\') {
                p_++;
                if (p_ >= end_) {
                    return fail("bad escape");
                }
                switch (*p_) {
                case '"':
                    out->push_back('"');
                    break;
                case '\\':
                    out->push_back('\\');
                    break;
                case '/':
                    out->push_back('/');
                    break;
                case 'n':
                    out->push_back('\n');
                    break;
                case 't':
                    out->push_back('\t');
                    break;
                case 'r':
                    out->push_back('\r');
                    break;
                case 'b':
                    out->push_back('\b');
                    break;
                case 'f':
                    out->push_back('\f');
                    break;
                case 'u': {
                    if (end_ - p_ < 5) {
                        return fail("bad \\u escape");
                    }
                    unsigned v =
                        unsigned(std::strtoul(std::string(p_ + 1, 4).c_str(), nullptr, 16));
                    if (v >= 0xd800 && v <= 0xdfff) {
                        return fail("surrogate \\u escape unsupported");
                    }
                    // As UTF-8 (one to three bytes for the Basic Multilingual Plane).
                    if (v < 0x80) {
                        out->push_back(char(v));
                    } else if (v < 0x800) {
                        out->push_back(char(0xc0 | (v >> 6)));
                        out->push_back(char(0x80 | (v & 0x3f)));
                    } else {
                        out->push_back(char(0xe0 | (v >> 12)));
                        out->push_back(char(0x80 | ((v >> 6) & 0x3f)));
                        out->push_back(char(0x80 | (v & 0x3f)));
                    }
                    p_ += 4;
                    break;
                }
                default:
                    return fail("bad escape");
                }
                p_++;
            } else {
                out->push_back(*p_++);
            }
        }
        if (p_ >= end_) {
            return fail("unterminated string");
        }
        p_++;
        return true;
    }
    bool number(Json *out) {
        const char *start = p_;
        if (p_ < end_ && *p_ == '-') {
            p_++;
        }
        if (p_ >= end_ || !(*p_ >= '0' && *p_ <= '9')) {
            return fail("bad number");
        }
        while (p_ < end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '.' || *p_ == 'e' || *p_ == 'E' ||
                             *p_ == '+' || *p_ == '-')) {
            p_++;
        }
        out->kind = Json::Number;
        out->number = std::strtod(std::string(start, p_).c_str(), nullptr);
        return true;
    }
    bool value(Json *out) {
        skip_space();
        if (p_ >= end_) {
            return fail("unexpected end");
        }
        switch (*p_) {
        case '{': {
            p_++;
            out->kind = Json::Object;
            skip_space();
            if (p_ < end_ && *p_ == '}') {
                p_++;
                return true;
            }
            for (;;) {
                skip_space();
                std::string key;
                if (!string(&key)) {
                    return false;
                }
                skip_space();
                if (p_ >= end_ || *p_ != ':') {
                    return fail("expected ':'");
                }
                p_++;
                Json v;
                if (!value(&v)) {
                    return false;
                }
                out->members.emplace_back(key, std::move(v));
                skip_space();
                if (p_ < end_ && *p_ == ',') {
                    p_++;
                    continue;
                }
                if (p_ < end_ && *p_ == '}') {
                    p_++;
                    return true;
                }
                return fail("expected ',' or '}'");
            }
        }
        case '[': {
            p_++;
            out->kind = Json::Array;
            skip_space();
            if (p_ < end_ && *p_ == ']') {
                p_++;
                return true;
            }
            for (;;) {
                Json v;
                if (!value(&v)) {
                    return false;
                }
                out->items.push_back(std::move(v));
                skip_space();
                if (p_ < end_ && *p_ == ',') {
                    p_++;
                    continue;
                }
                if (p_ < end_ && *p_ == ']') {
                    p_++;
                    return true;
                }
                return fail("expected ',' or ']'");
            }
        }
        case '"':
            out->kind = Json::String;
            return string(&out->str);
        case 't':
            out->kind = Json::Bool;
            out->boolean = true;
            return literal("true");
        case 'f':
            out->kind = Json::Bool;
            return literal("false");
        case 'n':
            return literal("null");
        default:
            return number(out);
        }
    }

    const char *p_;
    const char *end_;
    std::string error_;
};

}  // namespace tally_test

#endif  // TALLY_TEST_RUNTIME_JSON_H
