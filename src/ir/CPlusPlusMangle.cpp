// Itanium C++ ABI name mangling (its section 5.1) for the functions extern calls name: a nested
// name `N <source names> E` when qualified, then one <type> per parameter (`v` for none). Every
// prefix of a nested name, every class name and every pointer type is a substitution candidate,
// numbered in the order it first appears; a later occurrence is written `S_`, `S0_`, `S1_`, ...
// (base 36, digits then capitals). Builtin types are not candidates.

#include "ir/CPlusPlusMangle.h"

#include <algorithm>
#include <cctype>

#include "tally/Error.h"
#include "tally/Module.h"

namespace tally {

namespace {

class Mangler {
public:
    /** <source-name>s of `qualified` (`a::b::c`), in order. */
    static std::vector<std::string> parts(const std::string &qualified, const std::string &what) {
        std::vector<std::string> out;
        size_t start = 0;
        while (true) {
            size_t sep = qualified.find("::", start);
            std::string p = qualified.substr(start, sep == std::string::npos ? sep : sep - start);
            user_assert(
                !p.empty() &&
                std::all_of(p.begin(), p.end(),
                            [](char c) { return std::isalnum((unsigned char)c) || c == '_'; }) &&
                !std::isdigit((unsigned char)p[0]))
                << "codegen: C++ name mangling: '" << qualified << "' is not a C++ " << what
                << " name";
            out.push_back(std::to_string(p.size()) + p);
            if (sep == std::string::npos) {
                return out;
            }
            start = sep + 2;
        }
    }

    /** The substitution of the component whose canonical form is `key` if one was seen, else
     * `spelled` (its spelling here, itself perhaps with substitutions inside), and it becomes a
     * candidate. */
    std::string substitute(const std::string &key, const std::string &spelled) {
        auto it = std::find(seen.begin(), seen.end(), key);
        if (it == seen.end()) {
            seen.push_back(key);
            return spelled;
        }
        size_t i = size_t(it - seen.begin());
        if (i == 0) {
            return "S_";
        }
        std::string digits;
        for (size_t n = i - 1;; n /= 36) {
            int d = int(n % 36);
            digits.insert(digits.begin(), char(d < 10 ? '0' + d : 'A' + d - 10));
            if (n < 36) {
                break;
            }
        }
        return "S" + digits + "_";
    }

    /** A (possibly qualified) class name as a type; `key` is set to its canonical form. Each
     * prefix of a qualified name is a candidate, and so is the whole name. */
    std::string class_name(const std::string &qualified, std::string *key) {
        std::vector<std::string> ps = parts(qualified, "type");
        std::string canon = ps.size() == 1 ? ps[0] : "N";
        for (size_t j = 0; ps.size() > 1 && j < ps.size(); j++) {
            canon += ps[j];
        }
        *key = canon;
        if (ps.size() == 1) {
            return substitute(canon, canon);
        }
        // The longest prefix (the whole name included) already seen is its substitution; the
        // rest is spelled, each longer prefix becoming a candidate.
        std::string acc = "N", spelled;
        size_t k = 0;
        for (size_t n = ps.size(); n > 0 && k == 0; n--) {
            std::string prefix = "N";
            for (size_t j = 0; j < n; j++) {
                prefix += ps[j];
            }
            if (std::find(seen.begin(), seen.end(), prefix) != seen.end()) {
                spelled = substitute(prefix, prefix);
                acc = prefix;
                k = n;
            }
        }
        if (k == ps.size()) {
            return spelled;
        }
        spelled = "N" + spelled;
        for (size_t j = k; j < ps.size(); j++) {
            acc += ps[j];
            seen.push_back(acc);
            spelled += ps[j];
        }
        return spelled + "E";
    }

    std::string type(const Type &t) {
        user_assert(t.is_scalar()) << "codegen: C++ name mangling: a C++ function cannot take the "
                                   << "vector type " << t.to_string();
        if (t.is_handle()) {
            // Mangling a pointer typedef needs the function type it names, which the text
            // does not carry.
            user_assert(!t.is_pointer_typedef())
                << "codegen: C++ name mangling: cannot mangle the pointer typedef " << t.to_string()
                << " (its pointee type is not known)";
            std::string key;
            // A handle of no known type is `void *`, as Halide mangles one.
            return pointer_to(t.handle_name().empty() ? "void" : t.handle_name(), &key);
        }
        if (t.is_bool()) {
            return "b";
        }
        if (t.is_float()) {
            return t.bits() == 16 ? "DF16_" : t.bits() == 32 ? "f" : "d";
        }
        const char *s = t.is_int() ? "aslx" : "htmy";
        switch (t.bits()) {
        case 8:
            return std::string(1, s[0]);
        case 16:
            return std::string(1, s[1]);
        case 32:
            return t.is_int() ? "i" : "j";
        default:
            return t.is_int() ? "l" : "m";  // int64_t is `long` on LP64 targets
        }
    }

    /** `P` and the type `pointee` spells (`void`, `const char`, `struct halide_buffer_t`,
     * `a::Foo`, `void *`: a pointer to a pointer); `key` is set to its canonical form. The
     * pointee's own components become candidates first, then the qualified pointee, then the
     * pointer, as the ABI orders them. */
    std::string pointer_to(std::string pointee, std::string *key) {
        while (!pointee.empty() && pointee.back() == ' ') {
            pointee.pop_back();
        }
        std::string inner_key, inner;
        if (!pointee.empty() && pointee.back() == '*') {
            pointee.pop_back();
            inner = pointer_to(pointee, &inner_key);
        } else {
            // Halide 14 writes `const char`, Halide 21 `char const`: the same type.
            const std::string suffix = " const";
            bool is_const = pointee.compare(0, 6, "const ") == 0;
            if (is_const) {
                pointee = pointee.substr(6);
            } else if (pointee.size() > suffix.size() &&
                       pointee.compare(pointee.size() - suffix.size(), suffix.size(), suffix) ==
                           0) {
                is_const = true;
                pointee.resize(pointee.size() - suffix.size());
            }
            inner_key = builtin(pointee);
            inner = inner_key;
            if (inner.empty()) {
                if (pointee.compare(0, 7, "struct ") == 0) {
                    pointee = pointee.substr(7);
                }
                inner = class_name(pointee, &inner_key);
            }
            if (is_const) {
                inner_key = "K" + inner_key;
                inner = substitute(inner_key, "K" + inner);
            }
        }
        *key = "P" + inner_key;
        return substitute(*key, "P" + inner);
    }

    /** The builtin type spelled `name` (`void`, `char`, `int`, ...), or "". */
    static std::string builtin(const std::string &name) {
        static const std::pair<const char *, const char *> table[] = {
            {"void", "v"},           {"char", "c"},          {"signed char", "a"},
            {"unsigned char", "h"},  {"bool", "b"},          {"short", "s"},
            {"unsigned short", "t"}, {"int", "i"},           {"unsigned int", "j"},
            {"long", "l"},           {"unsigned long", "m"}, {"float", "f"},
            {"double", "d"},         {"int8_t", "a"},        {"uint8_t", "h"},
            {"int16_t", "s"},        {"uint16_t", "t"},      {"int32_t", "i"},
            {"uint32_t", "j"},       {"int64_t", "l"},       {"uint64_t", "m"}};
        for (const auto &[spelled, code] : table) {
            if (name == spelled) {
                return code;
            }
        }
        return "";
    }

    std::vector<std::string> seen;
};

}  // namespace

std::string itanium_mangled_name(const std::string &name, const std::vector<Type> &args) {
    Mangler m;
    std::vector<std::string> ps = Mangler::parts(name, "function");
    std::string out = "_Z";
    if (ps.size() == 1) {
        out += ps[0];
    } else {
        // The function's own name is no candidate; each enclosing scope is.
        out += "N";
        std::string acc;
        for (size_t j = 0; j + 1 < ps.size(); j++) {
            acc += ps[j];
            m.seen.push_back("N" + acc);
            out += ps[j];
        }
        out += ps.back() + "E";
    }
    if (args.empty()) {
        return out + "v";
    }
    for (const Type &t : args) {
        out += m.type(t);
    }
    return out;
}

EntrySymbols entry_symbols(const Module &m, const LoweredFunc &f) {
    EntrySymbols s;
    if (f.linkage == LinkageType::Internal) {
        s.name = s.function = f.name;
        s.argv = f.name + "_argv";
        s.metadata = f.name + "_metadata";
        return s;
    }
    size_t sep = f.name.rfind("::");
    std::string scope = sep == std::string::npos ? "" : f.name.substr(0, sep + 2);
    s.name = f.name.substr(scope.size());
    for (size_t b = 0, e; (e = scope.find("::", b)) != std::string::npos; b = e + 2) {
        s.namespaces.push_back(scope.substr(b, e - b));
    }
    if (!m.target.has_feature(Target::CPlusPlusMangling)) {
        s.function = s.name;
        s.argv = s.name + "_argv";
        s.metadata = s.name + "_metadata";
        return s;
    }
    std::vector<Type> params;
    for (const Argument &a : f.args) {
        params.push_back(a.is_buffer()                ? Handle("halide_buffer_t")
                         : a.name == "__user_context" ? Handle("const void")
                         : a.type.is_valid()          ? a.type
                                                      : Int(32));
    }
    s.mangled = true;
    s.function = itanium_mangled_name(f.name, params);
    s.argv = itanium_mangled_name(scope + s.name + "_argv", {Handle("void *")});
    s.metadata = itanium_mangled_name(scope + s.name + "_metadata", {});
    return s;
}

}  // namespace tally
