// The lexer: identifiers in Halide's generous spelling (dots, `$`, a leading `.` or `::`),
// numbers with Halide's float suffixes, C-style strings, and punctuation.

#include "text/Lexer.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "tally/Error.h"

namespace tally {

namespace {

bool is_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_ident_char(char c) {
    return is_alpha(c) || is_digit(c) || c == '.' || c == '$';
}

}  // namespace

std::string describe_byte(unsigned char c) {
    if (c >= 32 && c < 127) {
        return std::string("'") + char(c) + "'";
    }
    char buf[16];
    std::snprintf(buf, sizeof(buf), "byte 0x%02x", c);
    return buf;
}

Lexer::Lexer(const std::string &text, std::string filename)
    : src(text), file(std::move(filename)) {}

void Lexer::error(const Loc &loc, const std::string &msg) const {
    user_error << file << ":" << loc.line << ":" << loc.col << ": error: " << msg;
}

void Lexer::advance(size_t n) {
    for (size_t i = 0; i < n && pos < src.size(); i++) {
        if (src[pos] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
        pos++;
    }
}

void Lexer::skip_space() {
    while (pos < src.size()) {
        char c = src[pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            advance();
        } else if (c == '/' && pos + 1 < src.size() && src[pos + 1] == '/') {
            while (pos < src.size() && src[pos] != '\n') {
                advance();
            }
        } else {
            break;
        }
    }
}

const Token &Lexer::peek(int k) {
    while (int(ahead.size()) <= k) {
        ahead.push_back(lex());
    }
    return ahead[k];
}

Token Lexer::next() {
    peek(0);
    Token t = std::move(ahead.front());
    ahead.pop_front();
    return t;
}

void Lexer::split_next(size_t n) {
    Token &t = const_cast<Token &>(peek(0));
    internal_assert(t.kind == Token::Ident && n > 0 && n < t.text.size())
        << "split_next of a token that is not a longer identifier";
    Token rest = t;
    rest.text = t.text.substr(n);
    rest.newline_before = false;
    rest.loc.col += int(n);
    t.text.resize(n);
    ahead.insert(ahead.begin() + 1, std::move(rest));
}

bool Lexer::read_blob(std::string *bytes) {
    if (!ahead.empty()) {
        internal_error << "read_blob after lookahead";
    }
    if (src.compare(pos, 4, "...}") == 0) {
        advance(3);
        return false;
    }
    Loc start = here();
    size_t nul = src.find('\0', pos);
    if (nul == std::string::npos) {
        error(start, "buffer contents are not terminated by a NUL byte (write `{...}` for a "
                     "buffer without contents)");
    }
    *bytes = src.substr(pos, nul + 1 - pos);
    advance(nul + 1 - pos);
    return true;
}

std::string_view Lexer::raw_rest() const {
    if (!ahead.empty()) {
        internal_error << "raw_rest after lookahead";
    }
    return std::string_view(src).substr(pos);
}

std::string Lexer::read_raw(size_t n) {
    internal_assert(ahead.empty() && n <= src.size() - pos) << "read_raw past the end";
    std::string s = src.substr(pos, n);
    advance(n);
    return s;
}

std::string Lexer::read_line_raw() {
    if (!ahead.empty()) {
        internal_error << "read_line_raw after lookahead";
    }
    size_t start = pos;
    while (pos < src.size() && src[pos] != '\n') {
        advance();
    }
    std::string s = src.substr(start, pos - start);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) {
        s.pop_back();
    }
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.erase(0, 1);
    }
    return s;
}

Token Lexer::lex() {
    int line_before = line;
    skip_space();
    Token t;
    t.loc = here();
    t.newline_before = line != line_before || pos == 0;
    if (pos >= src.size()) {
        t.kind = Token::End;
        return t;
    }
    char c = src[pos];
    auto peekc = [&](size_t k) { return pos + k < src.size() ? src[pos + k] : '\0'; };

    // Identifiers: `name`, `a.b.$n`, `.__thread_id_x`, `::f`, `ns::f`.
    bool colon_start = c == ':' && peekc(1) == ':' && (is_alpha(peekc(2)) || peekc(2) == '.');
    bool dot_start = c == '.' && (is_alpha(peekc(1)) || peekc(1) == '$');
    if (is_alpha(c) || c == '$' || colon_start || dot_start) {
        size_t start = pos;
        if (colon_start) {
            advance(2);
        }
        while (pos < src.size()) {
            if (is_ident_char(src[pos])) {
                advance();
            } else if (src[pos] == ':' && peekc(1) == ':' && is_alpha(peekc(2))) {
                advance(2);
            } else {
                break;
            }
        }
        t.kind = Token::Ident;
        t.text = src.substr(start, pos - start);
        return t;
    }

    if (is_digit(c)) {
        size_t start = pos;
        bool is_float = false;
        while (is_digit(peekc(0))) {
            advance();
        }
        if (peekc(0) == '.' && is_digit(peekc(1))) {
            is_float = true;
            advance();
            while (is_digit(peekc(0))) {
                advance();
            }
        }
        if ((peekc(0) == 'e' || peekc(0) == 'E') &&
            (is_digit(peekc(1)) || ((peekc(1) == '-' || peekc(1) == '+') && is_digit(peekc(2))))) {
            is_float = true;
            advance(2);
            while (is_digit(peekc(0))) {
                advance();
            }
        }
        t.text = src.substr(start, pos - start);
        if (peekc(0) == 'f' || peekc(0) == 'h') {
            is_float = true;
            t.float_suffix = peekc(0);
            advance();
        }
        if (is_alpha(peekc(0))) {
            error(here(),
                  "unexpected " + describe_byte(peekc(0)) + " after number '" + t.text + "'");
        }
        if (is_float) {
            t.kind = Token::Float;
            errno = 0;
            t.float_value = std::strtod(t.text.c_str(), nullptr);
        } else {
            t.kind = Token::Int;
            errno = 0;
            t.int_value = std::strtoull(t.text.c_str(), nullptr, 10);
            if (errno == ERANGE) {
                error(t.loc, "integer literal '" + t.text + "' does not fit in 64 bits");
            }
        }
        return t;
    }

    if (c == '"' || c == '`') {
        // A string literal, or a `quoted name` (any characters, same escapes).
        const char quote = c;
        advance();
        std::string s;
        while (true) {
            if (pos >= src.size() || src[pos] == '\n') {
                error(t.loc, quote == '"' ? "unterminated string literal" : "unterminated name");
            }
            char d = src[pos];
            if (d == quote) {
                advance();
                break;
            }
            if (d == '\\') {
                char e = peekc(1);
                advance(2);
                switch (e) {
                case 'n':
                    s += '\n';
                    break;
                case 't':
                    s += '\t';
                    break;
                case 'r':
                    s += '\r';
                    break;
                case '"':
                    s += '"';
                    break;
                case '`':
                    s += '`';
                    break;
                case '\\':
                    s += '\\';
                    break;
                case '0':
                    s += '\0';
                    break;
                case 'x': {
                    auto hex = [](char h) {
                        return is_digit(h)              ? h - '0'
                               : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                               : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                        : -1;
                    };
                    int h1 = hex(peekc(0)), h2 = hex(peekc(1));
                    if (h1 < 0 || h2 < 0) {
                        error(here(), "bad \\x escape in string literal");
                    }
                    s += char(h1 * 16 + h2);
                    advance(2);
                    break;
                }
                default:
                    error(here(), "unknown escape '\\" + std::string(1, e) + "' in string");
                }
                continue;
            }
            if ((unsigned char)d < 32 && d != '\t') {
                error(here(), "unexpected " + describe_byte(d) + " in string literal");
            }
            s += d;
            advance();
        }
        if (quote == '`') {
            if (s.empty()) {
                error(t.loc, "empty name");
            }
            t.kind = Token::Ident;
            t.quoted = true;
        } else {
            t.kind = Token::String;
        }
        t.text = s;
        return t;
    }

    static const char *const two[] = {"==", "!=", "<=", ">=", "&&", "||"};
    for (const char *p : two) {
        if (c == p[0] && peekc(1) == p[1]) {
            t.kind = Token::Punct;
            t.text = p;
            advance(2);
            return t;
        }
    }
    static const char singles[] = "()[]{},=<>+-*/%!:@;?";
    for (const char *p = singles; *p; p++) {
        if (c == *p) {
            t.kind = Token::Punct;
            t.text = std::string(1, c);
            advance();
            return t;
        }
    }
    error(t.loc, "unexpected " + describe_byte(c));
}

}  // namespace tally
