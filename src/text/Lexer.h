/** \file
 * The lexer of the IR text format. Tokens carry their 1-based line and column. Bytes outside
 * printable ASCII (other than whitespace) are reported as errors, except inside the raw
 * contents of a `buffer NAME = { ... }` blob, which the parser reads with read_blob().
 */
#ifndef TALLY_TEXT_LEXER_H
#define TALLY_TEXT_LEXER_H

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace tally {

struct Loc {
    int line = 1, col = 1;
};

struct Token {
    enum Kind { End, Ident, Int, Float, String, Punct };
    Kind kind = End;
    std::string text;  // identifier, punctuation, string contents (unescaped), number spelling
    uint64_t int_value = 0;
    double float_value = 0;
    char float_suffix = 0;        // 'f', 'h' or 0
    bool newline_before = false;  // a line break separates it from the previous token
    bool quoted = false;          // an identifier written as `quoted name`
    Loc loc;
};

class Lexer {
public:
    Lexer(const std::string &text, std::string filename);

    const Token &peek(int k = 0);
    Token next();
    /** Splits the next token, an identifier, after its first `n` characters into two
     * identifiers (the second starting `n` columns later). For Halide's vector handle types,
     * which it prints run together with the name that follows: `(char *)x4stringify(...)`. */
    void split_next(size_t n);

    /** Reads the raw bytes of a buffer blob starting right after the `{` just consumed: up to
     * and including a NUL byte, or `...` for an opaque buffer (returns false). The closing
     * `}` is left for the parser. No token may have been peeked past the `{`. */
    bool read_blob(std::string *bytes);
    /** The raw text from the current position (no token may have been peeked), and a read of
     * its first `n` bytes: for blobs whose length their own framing gives (binary SPIR-V). */
    std::string_view raw_rest() const;
    std::string read_raw(size_t n);

    /** Reads the raw rest of the current line (used for `target=...`), trimmed. No token may
     * have been peeked. */
    std::string read_line_raw();
    /** Raw access for the target string: is the next byte a space or tab; skip one byte. */
    bool peek_raw_is_space() const {
        return ahead.empty() && pos < src.size() && (src[pos] == ' ' || src[pos] == '\t');
    }
    void skip_raw() { advance(); }

    /** Throws a CompileError `file:line:col: error: msg`. */
    [[noreturn]] void error(const Loc &loc, const std::string &msg) const;
    const std::string &filename() const { return file; }
    /** Where the next raw read would start (valid only with no lookahead). */
    Loc position() const { return {line, col}; }

private:
    Token lex();
    void skip_space();
    Loc here() const { return {line, col}; }
    void advance(size_t n = 1);

    const std::string &src;
    std::string file;
    size_t pos = 0;
    int line = 1, col = 1;
    std::deque<Token> ahead;
};

/** Renders a byte for a diagnostic: the character itself if printable, else \xNN. */
std::string describe_byte(unsigned char c);

}  // namespace tally

#endif  // TALLY_TEXT_LEXER_H
